package main

import (
	"os"

	"needle/bench"
	"needle/docstore/synth"
)

func init() {
	benchmarks.add(command{name: "docstore", summary: "corpus sidecar build vs plain read, row/url lookup, RSS, on a synthetic wiki-like corpus", run: runBenchDocstore})
}

func runBenchDocstore(args []string) error {
	var o bench.DocstoreOptions
	fs := newFlagSet("bench docstore", "[flags]\n\n"+
		"Writes a synthetic wiki-like corpus (wiki-18-shaped rows, ~680 bytes each at --words 100) and measures, in one run:\n"+
		"a plain sequential read of it (baseline), the offsets sidecar build on one core (and the ratio),\n"+
		"random row lookups (ns, allocations), full validation, the url index build and url lookups\n"+
		"(the corpus used as a pages file), and RSS (anonymous/file-backed) around open and lookups.")
	fs.Int64Var(&o.Rows, "rows", 1_000_000, "corpus rows to generate")
	fs.IntVar(&o.Words, "words", synth.Words, "mean passage length in words (wiki-18: 100); small values test many short rows, e.g. 21M rows as in wiki-18")
	fs.IntVar(&o.Rounds, "rounds", 3, "rounds of plain read vs sidecar build (the best of each is reported)")
	fs.IntVar(&o.Lookups, "lookups", 1_000_000, "random row and url lookups to time")
	fs.StringVar(&o.Dir, "dir", "", "folder for the corpus and its sidecars (default: a temp folder, removed afterwards; kept if given)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return bench.Docstore(os.Stdout, o)
}
