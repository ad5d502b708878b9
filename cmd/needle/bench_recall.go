package main

import (
	"os"

	"needle/bench"
)

func init() {
	benchmarks.add(command{name: "recall", summary: "recall@1/@5 of a `needle build` folder on a queries JSONL with gold rows (tools/wordnet)", run: runBenchRecall})
}

func runBenchRecall(args []string) error {
	var o bench.RecallOptions
	fs := newFlagSet("bench recall", "--index DIR --queries Q.jsonl [--model DIR] [--milvus URI --collection NAME]\n\n"+
		"Encodes the queries, searches --index and prints recall@1/@5/@10 against the gold rows as one JSON object.\n"+
		"--milvus searches that collection of the same rows instead and adds its recall@10 against --index (exact\n"+
		"when Flat); --bm25 also compares BM25 and hybrid retrieval with dense.")
	fs.options(o.Specs())
	if err := fs.parse(args); err != nil {
		return err
	}
	o.Table = os.Stderr
	return fs.named(bench.Recall(os.Stdout, o))
}
