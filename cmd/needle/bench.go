package main

import (
	"flag"
	"fmt"
	"os"
)

// benchmark is one `needle bench <name>` target; its file owns its flags.
type benchmark struct {
	name    string
	summary string
	run     func(args []string) error
}

// benchOrder is the order `needle bench --help` lists targets in.
var benchOrder = []string{"kernels", "encode", "retrieve", "trace", "docstore", "recall", "search", "index"}

var benchmarks = map[string]benchmark{}

func registerBench(b benchmark) { benchmarks[b.name] = b }

// plotFlag adds --plot to a target's flags: the same flag for every target; the target fills
// a bench/plot Figure from what it measured.
func plotFlag(fs *flag.FlagSet, path *string) {
	fs.StringVar(path, "plot", "", "also draw what the run measured into this .svg or .png file: latency histograms with p50/p90/p99, queries/s over the run, side-by-side bars (docs/bench.md)")
}

func init() {
	register(command{name: "bench", summary: "benchmarks: kernels, encode, retrieve (and its trace), docstore, recall, search, index", run: runBench})
}

func runBench(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(os.Stdout, "Usage: needle bench <target> [flags]   (needle bench <target> --help)\n\nTargets:\n")
		for _, n := range benchOrder {
			if b, ok := benchmarks[n]; ok {
				fmt.Fprintf(os.Stdout, "  %-9s %s\n", n, b.summary)
			}
		}
		if len(args) == 0 {
			return fmt.Errorf("missing benchmark target")
		}
		return nil
	}
	b, ok := benchmarks[args[0]]
	if !ok {
		return fmt.Errorf("unknown benchmark %q (see needle bench --help)", args[0])
	}
	return b.run(args[1:])
}
