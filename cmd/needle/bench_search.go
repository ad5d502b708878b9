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
	fs.BoolVar(&o.GPU, "gpu", false, "the GPU flat index on all visible GPUs (CUDA_VISIBLE_DEVICES) instead of FAISS on the CPU")
	fs.BoolVar(&o.FP32, "gpu-fp32", false, "with --gpu: fp32 vectors on the device (default fp16)")
	fs.StringVar(&o.Index, "index", "", "a FAISS IndexFlatIP/L2 file or a `needle build` folder with one, instead of synthetic vectors")
	fs.Int64Var(&o.Rows, "rows", 200_000, "synthetic rows (wiki-18: 21015324; on the CPU they are held in RAM: rows x dim x 4 bytes)")
	fs.IntVar(&o.Dim, "dim", 768, "synthetic dimension")
	fs.StringVar(&o.Metric, "metric", "ip", "synthetic metric: ip or l2")
	fs.IntVar(&o.Batch, "batch", 64, "queries per search")
	fs.IntVar(&o.K, "k", 10, "results per query (GPU: up to 8192)")
	fs.IntVar(&o.Rounds, "rounds", 5, "timed searches")
	fs.IntVar(&o.Threads, "threads", 0, "CPU threads for FAISS and the bandwidth yardstick (0 = all cores)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the synthetic vectors and the queries")
	plotFlag(fs, &o.Plot)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return bench.Search(os.Stdout, o)
}
