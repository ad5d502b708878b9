package main

import (
	"os"

	"needle/bench"
)

func init() {
	benchmarks.add(command{name: "index", summary: "an index as serve opens it (mapped flat file, compact form, FAISS file): ready time, batches, RSS, recall, FAISS comparison", run: runBenchIndex})
}

func runBenchIndex(args []string) error {
	o := bench.IndexOptions{}
	fs := newFlagSet("bench index", "--index FILE|DIR --queries Q.f32 [--gt GT.i64 --gt-k 100] [--batch 64] [--batches 2] [--faiss]\n\n"+
		"Opens an index as `needle serve --index` does (the mapped backend for a flat file, a `needle convert`\n"+
		"form folder, FAISS for other files) and times batches of query vectors; writes one JSON object. The\n"+
		"wiki-18-shaped set and its ground truth come from bench/wiki18_shape.py. --faiss (flat files) also loads\n"+
		"the file with FAISS (RAM = file size: use it on a subset) and counts the answers that differ.")
	fs.StringVar(&o.Index, "index", "", "index file or compact form folder (required)")
	fs.StringVar(&o.Backend, "index-backend", "", "as serve's --index-backend (default auto)")
	fs.IntVar(&o.Nprobe, "nprobe", 0, "IVF lists visited per query (0: the form's, else FAISS's default)")
	fs.IntVar(&o.Rescore, "rescore", 0, "compact forms: candidates re-scored per query (0: the form's; -1: none)")
	fs.BoolVar(&o.Mmap, "mmap", false, "map IVF lists instead of loading them")
	fs.StringVar(&o.Queries, "queries", "", "raw little-endian float32 query vectors of the index dimension (required)")
	fs.StringVar(&o.GT, "gt", "", "raw int64 exact ids, --gt-k per query, best first: reports recall@10")
	fs.IntVar(&o.GTK, "gt-k", 100, "ids per query in --gt")
	fs.IntVar(&o.K, "k", 10, "results per query")
	fs.IntVar(&o.Batch, "batch", 64, "queries per search (serve searches up to --max-batch encoded queries at once)")
	fs.IntVar(&o.Batches, "batches", 2, "batches to time")
	fs.IntVar(&o.Threads, "threads", 0, "search threads (0 = all cores)")
	fs.BoolVar(&o.Faiss, "faiss", false, "flat files: also search with FAISS (loads the file into RAM) and compare every answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return bench.Index(os.Stdout, o)
}
