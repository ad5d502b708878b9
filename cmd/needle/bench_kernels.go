package main

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"needle/bench"
)

func init() {
	benchmarks.add(command{name: "kernels", summary: "memory bandwidth, then logprob (and delta) kernels: GB/s, elements/s", run: runBenchKernels})
}

func runBenchKernels(args []string) error {
	var o bench.KernelsOptions
	fs := newFlagSet("bench kernels", "[--json] [--threads N] [--min-time D] [--membw-mib M] [--only TEXT]")
	fs.BoolVar(&o.JSON, "json", false, "print one JSON object (results per case and thread count) instead of a table")
	fs.IntVar(&o.Threads, "threads", runtime.NumCPU(), "the 'all threads' count; every case also runs with 1 thread")
	fs.DurationVar(&o.MinTime, "min-time", time.Second, "keep repeating a measurement for at least this long (at least 3 runs); the best run counts")
	fs.IntVar(&o.MembwMiB, "membw-mib", 512, "size in MiB of the buffer read to measure memory bandwidth (keep it well above the L3 size)")
	fs.StringVar(&o.Only, "only", "", "run only the kernel cases whose name contains this text (membw always runs)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return bench.Kernels(os.Stdout, o)
}
