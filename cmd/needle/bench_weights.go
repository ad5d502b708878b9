package main

import (
	"fmt"
	"log"
	"os"
	"runtime"

	"needle/bench"
	"needle/weights/wire"
)

func init() {
	benchmarks.add(command{name: "weights", summary: "weight transfer: publish -> receivers ready, encode/apply/bytes vs AstraFlow's NumPy", run: runBenchWeights})
}

func runBenchWeights(args []string) error {
	o := bench.WeightsOptions{Format: wire.Compact}
	var format string
	fs := newFlagSet("bench weights", "[--shape qwen2.5-1.5b] [--changed 0.01] [--receivers 2] [--tree] [--python PY]")
	fs.StringVar(&o.Shape, "shape", "qwen2.5-1.5b", "model shape (bf16): qwen2.5-0.5b, qwen2.5-1.5b, tiny")
	fs.Float64Var(&o.Changed, "changed", 0.01, "fraction of elements the step changes")
	fs.IntVar(&o.Receivers, "receivers", 2, "receivers on loopback")
	fs.BoolVar(&o.Tree, "tree", false, "the first receiver re-serves, the others pull from it")
	fs.StringVar(&o.Dir, "dir", "/dev/shm", "folder of the halves and the receivers' files")
	fs.IntVar(&o.Threads, "threads", runtime.NumCPU(), "goroutines of encode and apply")
	fs.StringVar(&format, "format", "compact", "delta records: compact or astraflow")
	fs.StringVar(&o.Python, "python", "", "Python with NumPy for the AstraFlow baseline (empty: skip it)")
	fs.StringVar(&o.Script, "script", "bench/weights_astraflow.py", "the baseline script")
	fs.StringVar(&o.AstraFlow, "astraflow", "", "a checkout of AstraFlow (by hand, never committed): the baseline's encode runs AstraFlow's own _compute_delta instead of its NumPy restatement (--python needs torch and pyzmq)")
	fs.IntVar(&o.MembwMiB, "membw-mib", 512, "buffer of the read-bandwidth measurement")
	exe, _ := os.Executable()
	fs.StringVar(&o.Needle, "needle", exe, "needle binary that runs each receiver as its own process (empty: receivers in this process)")
	logs := fs.Bool("log", false, "the sender's and receivers' log lines on standard error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	f, err := wire.ParseFormat(format)
	if err != nil {
		return fmt.Errorf("--format: %w", err)
	}
	o.Format = f
	if *logs {
		o.Log = log.New(os.Stderr, "", log.Lmicroseconds)
	}
	return bench.Weights(os.Stdout, o)
}
