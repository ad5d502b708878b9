package main

import "flag"

// benchmarks are the `needle bench <target>` targets; each file adds its own and owns its flags.
var benchmarks = newGroup("needle bench", "target", "", "kernels", "encode", "retrieve", "trace", "docstore", "recall", "search", "index", "weights")

// plotFlag adds --plot to a target's flags: the same flag for every target; the target fills
// a bench/plot Figure from what it measured.
func plotFlag(fs *flag.FlagSet, path *string) {
	fs.StringVar(path, "plot", "", "also draw what the run measured into this .svg or .png file: latency histograms with p50/p90/p99, queries/s over the run, side-by-side bars (docs/bench.md)")
}

func init() {
	register(command{name: "bench", summary: "benchmarks: kernels, encode, retrieve (and its trace), docstore, recall, search, index", run: benchmarks.run})
}
