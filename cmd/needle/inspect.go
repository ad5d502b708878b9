package main

import (
	"errors"
	"fmt"
	"os"

	"needle/indexbuild"
)

func init() {
	register(command{name: "inspect", summary: "index type, dimension, count, metric; corpus rows, match, bad rows", run: runInspect})
}

func runInspect(args []string) error {
	fs := newFlagSet("inspect", "--index FILE|DIR [--corpus FILE] [--load] [--max-bad 100]\n\n"+
		"Prints the index's FAISS type, dimension, vector count and metric (read from the file's\n"+
		"headers after checking its whole structure: milliseconds for a flat index of any size;\n"+
		"an HNSW graph is scanned), then the corpus's row count, whether it equals the index\n"+
		"count, and the corpus lines that are not JSON objects with a string \"contents\"\n"+
		"(their rows never shift).\n"+
		"Exits with an error when the index and corpus (or manifest) disagree.")
	index := fs.String("index", "", "index file, or a needle build output folder (its manifest.json names the index and corpus) (required)")
	corpus := fs.String("corpus", "", "corpus JSONL whose line i is index row i; default: the manifest's corpus when --index is a folder")
	load := fs.Bool("load", false, "also load the index with FAISS (reads all of it into RAM, except mmapped IVF lists) and report its class")
	maxBad := fs.Int("max-bad", 100, "print at most this many bad corpus lines (the total is always printed); 0 = all")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	case *index == "":
		return errors.New("--index is required (see --help)")
	case *maxBad < 0:
		return fmt.Errorf("--max-bad %d: want >= 0", *maxBad)
	}
	return indexbuild.Inspect(os.Stdout, indexbuild.InspectOptions{Index: *index, Corpus: *corpus, Load: *load, MaxBad: *maxBad, Log: os.Stderr})
}
