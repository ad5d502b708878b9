package main

import (
	"os"

	"needle/bench"
)

func init() {
	benchmarks.add(command{name: "index", summary: "an index as serve opens it (mapped flat file, compact form, FAISS file): ready time, batches, RSS, recall, FAISS comparison", run: runBenchIndex})
}

func runBenchIndex(args []string) error {
	var o bench.IndexOptions
	fs := newFlagSet("bench index", "--index FILE|DIR --queries Q.f32 [--gt GT.i64 --gt-k 100] [--batch 64] [--batches 2] [--faiss]\n\n"+
		"Opens an index as `needle serve --index` does (the mapped backend for a flat file, a `needle convert`\n"+
		"form folder, FAISS for other files) and times batches of query vectors; writes one JSON object. The\n"+
		"wiki-18-shaped set and its ground truth come from bench/wiki18_shape.py. --faiss (flat files) also loads\n"+
		"the file with FAISS (RAM = file size: use it on a subset) and counts the answers that differ.")
	fs.options(o.Specs())
	if err := fs.parse(args); err != nil {
		return err
	}
	return fs.named(bench.Index(os.Stdout, o))
}
