package main

import (
	"fmt"
	"os"
	"strings"

	"needle/bench"
	"needle/encoder/bert"
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
	fs.StringVar(&o.Model, "model", os.Getenv("NEEDLE_MODEL"), "MiniLM model folder, its tokenizer also serves the e5 shape (default $NEEDLE_MODEL, which the Makefile sets)")
	fs.StringVar(&o.Shape, "shape", "both", "which models: both, minilm or e5")
	fs.IntVar(&o.Passages, "passages", 512, "passages per run")
	fs.IntVar(&o.Queries, "queries", 100, "single queries timed one by one")
	fs.IntVar(&o.BatchSize, "batch-size", 64, "texts per forward pass")
	fs.IntVar(&o.Threads, "threads", 2, "threads of a forward pass (the Linears' own thread team and OpenMP's row-wise ops; give bench/encode_pytorch.py the same count)")
	fs.IntVar(&o.Repeat, "repeat", 3, "passage runs per model; the best is reported")
	fs.StringVar(&o.WordNet, "wordnet", "/usr/share/wordnet/data.noun", "WordNet noun data file the texts come from")
	fs.StringVar(&o.Dump, "dump", "", "write the texts as JSON {passages, queries} to this file and exit")
	fs.BoolVar(&o.JSON, "json", false, "print one JSON object instead of a table")
	precisions := fs.String("precision", "fp16", "comma-separated precisions of the Linear layers to run in turn (fp16, int8, bf16); each result adds tokens/s, model GOP/s and its share of the precision's multiply peak measured on --threads in the same run")
	fs.Var(gpuMode{&o.GPU}, "gpu", "run on GPU 0 (--batch-size then defaults to 512) and add tokens/s, model TFLOP/s and its share of the fp16 GEMM peak measured in the same run, and the wiki-18 projection; "+
		"without a GPU: one line saying why, then the CPU (--gpu=require: an error)")
	plotFlag(fs, &o.Plot)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.GPU != "" && !flagGiven(fs, "batch-size") {
		o.BatchSize = 512
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	}
	for _, s := range strings.Split(*precisions, ",") {
		p, err := bert.ParsePrecision(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("--precision: %w", err)
		}
		o.Precisions = append(o.Precisions, p)
	}
	return bench.Encode(os.Stdout, o)
}
