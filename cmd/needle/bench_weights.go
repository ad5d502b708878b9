package main

import (
	"log"
	"os"

	"needle/bench"
)

func init() {
	benchmarks.add(command{name: "weights", summary: "weight transfer: publish -> receivers ready, encode/apply/bytes vs AstraFlow's NumPy", run: runBenchWeights})
}

func runBenchWeights(args []string) error {
	var o bench.WeightsOptions
	fs := newFlagSet("bench weights", "[--shape qwen2.5-1.5b] [--changed 0.01] [--receivers 2] [--tree] [--python PY]")
	fs.options(o.Specs())
	logs := fs.Bool("log", false, "the sender's and receivers' log lines on standard error")
	if err := fs.parse(args); err != nil {
		return err
	}
	if !fs.given("needle") {
		o.Needle, _ = os.Executable()
	}
	if *logs {
		o.Log = log.New(os.Stderr, "", log.Lmicroseconds)
	}
	return fs.named(bench.Weights(os.Stdout, o))
}
