package main

import (
	"os"

	"needle/bench"
)

func init() {
	benchmarks.add(command{name: "kernels", summary: "memory bandwidth, then logprob (and delta) kernels: GB/s, elements/s", run: runBenchKernels})
}

func runBenchKernels(args []string) error {
	var o bench.KernelsOptions
	fs := newFlagSet("bench kernels", "[--json] [--threads N] [--min-time D] [--membw-mib M] [--only TEXT]")
	fs.options(o.Specs())
	if err := fs.parse(args); err != nil {
		return err
	}
	return fs.named(bench.Kernels(os.Stdout, o))
}
