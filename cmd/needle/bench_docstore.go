package main

import (
	"os"

	"needle/bench"
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
	fs.options(o.Specs())
	if err := fs.parse(args); err != nil {
		return err
	}
	return fs.named(bench.Docstore(os.Stdout, o))
}
