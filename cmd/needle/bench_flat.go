package main

import (
	"os"

	"needle/bench"
)

func init() {
	registerBench(benchmark{name: "flat", summary: "the memory-mapped flat index on a flat index file: ready time, pass per batch, RSS, recall, FAISS comparison", run: runBenchFlat})
}

func runBenchFlat(args []string) error {
	o := bench.FlatOptions{}
	fs := newFlagSet("bench flat", "--index FILE --queries Q.f32 [--gt GT.i64 --gt-k 100] [--batch 64] [--batches 2] [--faiss]\n\n"+
		"Opens a flat index file with the mapped backend of `needle serve` (engine/flatmap) and times\n"+
		"one exact pass over the file per batch of queries; writes one JSON object. The wiki-18-shaped\n"+
		"set and its ground truth come from bench/wiki18_shape.py. --faiss also loads the file with\n"+
		"FAISS (RAM = file size: use it on a subset) and counts the answers that differ.")
	fs.StringVar(&o.Index, "index", "", "flat index file (IndexFlatIP/L2) (required)")
	fs.StringVar(&o.Queries, "queries", "", "raw little-endian float32 query vectors of the index dimension (required)")
	fs.StringVar(&o.GT, "gt", "", "raw int64 exact ids, --gt-k per query, best first: reports recall@10")
	fs.IntVar(&o.GTK, "gt-k", 100, "ids per query in --gt")
	fs.IntVar(&o.K, "k", 10, "results per query")
	fs.IntVar(&o.Batch, "batch", 64, "queries per search (one pass over the file each)")
	fs.IntVar(&o.Batches, "batches", 2, "batches to time")
	fs.IntVar(&o.Threads, "threads", 0, "search threads (0 = all cores)")
	fs.BoolVar(&o.Faiss, "faiss", false, "also search with FAISS (loads the file into RAM) and compare every answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return bench.Flat(os.Stdout, o)
}
