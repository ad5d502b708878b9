package main

import (
	"os"

	"needle/bench"
)

func init() {
	benchmarks.add(command{name: "search", summary: "exact flat search: QPS, GB/s, TFLOP/s of FAISS on the CPU or the GPU flat index (--gpu) against measured limits", run: runBenchSearch})
}

func runBenchSearch(args []string) error {
	var o bench.SearchOptions
	fs := newFlagSet("bench search", "[--gpu] [--rows N --dim D | --index FILE|DIR] [--batch B] [--k K]\n\n"+
		"Times one search of --batch queries over a flat index, --rounds times after a warm-up, and prints one\n"+
		"JSON object: the best and median time, QPS, GB/s (vector bytes read once per search), TFLOP/s, and\n"+
		"their share of the machine's own limits measured in the same run: on the CPU the read bandwidth of\n"+
		"all threads; with --gpu the device's read bandwidth and cuBLAS fp16 GEMM rate. Synthetic vectors\n"+
		"(seeded, uniform in [-1, 1)) are made in RAM for the CPU and on the device for --gpu, so the GPU\n"+
		"path needs no file and no host memory for 21M x 768 (wiki-18's shape).")
	fs.options(o.Specs())
	if err := fs.parse(args); err != nil {
		return err
	}
	return fs.named(bench.Search(os.Stdout, o))
}
