package main

import (
	"encoding/json"
	"os"

	"needle/index/bm25"
)

// bm25s are the commands that look into a BM25 index folder (`needle build --bm25`).
var bm25s = newGroup("needle bm25", "subcommand", "Looks into a BM25 index folder (needle build --bm25).\n\n", "explain")

func init() {
	register(command{name: "bm25", summary: "explain a BM25 score: each query term's part of it", run: bm25s.run})
	bm25s.add(command{name: "explain", summary: "--index DIR --query Q --doc ID: the row's score for Q, term by term", run: runBM25Explain})
}

func runBM25Explain(args []string) error {
	fs := newFlagSet("bm25 explain", "--index DIR --query Q --doc ID [--json]\n\n"+
		"Takes apart the score that `needle serve --index DIR` gives the row of corpus id ID for query Q,\n"+
		"as Lucene's explain does: per query term its count, df, idf, frequency in the row and score\n"+
		"(count * idf * freq / (freq + k1 (1 - b + b length/avgdl))), whose sum is the row's score.")
	dir := fs.String("index", "", "BM25 index folder (required)")
	query := fs.String("query", "", "query text (required)")
	doc := fs.String("doc", "", "the row's corpus \"id\" (required)")
	asJSON := fs.Bool("json", false, "print the explanation as one JSON object")
	if err := parseRequired(fs, args, map[string]*string{"index": dir, "query": query, "doc": doc}); err != nil {
		return err
	}
	x, err := bm25.Open(*dir)
	if err != nil {
		return err
	}
	defer x.Close()
	e, err := x.Explain(*query, *doc)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(e)
	}
	return e.WriteText(os.Stdout)
}
