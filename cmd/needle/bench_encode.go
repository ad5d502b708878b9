package main

import (
	"os"

	"needle/bench"
)

func init() {
	benchmarks.add(command{name: "encode", summary: "BERT encoder: passages/s at batch 64 and single-query latency (MiniLM, e5-base shape)", run: runBenchEncode})
}

func runBenchEncode(args []string) error {
	var o bench.EncodeOptions
	fs := newFlagSet("bench encode", "[--model DIR] [--shape both|minilm|e5] [--precision fp16,int8,bf16] [--passages 512] [--queries 100] [--threads 2] [--json] [--gpu]\n\n"+
		"Encodes real passages of mixed length (WordNet glosses joined, /usr/share/wordnet) with\n"+
		"--batch-size texts per forward pass and reports passages/s (best of --repeat, wall and per\n"+
		"CPU-second), then the latency of single queries (median, p90). Shapes: the real MiniLM at\n"+
		"--model and an e5-base-v2-shaped model (12 x 768, 12 heads, FFN 3072) with seeded random\n"+
		"weights (same cost as the real one). --dump writes the texts for bench/encode_pytorch.py.\n"+
		"Peak RSS is the process's: run one --shape at a time to read it per model.")
	fs.options(o.Specs())
	if err := fs.parse(args); err != nil {
		return err
	}
	if !fs.given("model") {
		o.Model = os.Getenv("NEEDLE_MODEL")
	}
	if o.GPU != "" && !fs.given("batch-size") {
		o.BatchSize = 512
	}
	return fs.named(bench.Encode(os.Stdout, o))
}
