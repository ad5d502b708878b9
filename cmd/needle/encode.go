package main

import (
	"errors"
	"fmt"
	"os"

	"needle/encoder/bert"
	"needle/internal/jsonl"
)

func init() {
	register(command{name: "encode", summary: "JSON Lines strings -> embeddings (JSON Lines or .npy) with a BERT model", run: runEncode})
}

// encodeChunk is how many input texts are encoded (and their output written) at a time.
const encodeChunk = 4096

func runEncode(args []string) error {
	fs := newFlagSet("encode", "--model DIR [--prefix \"\"] [--max-length 256] [--batch-size 64] [--in FILE] [--npy FILE] [--gpu]\n\n"+
		"Reads JSON Lines, one JSON string per line, and writes one embedding per input in\n"+
		"input order: a JSON array of floats per line on stdout, or, with --npy, a float32\n"+
		"NumPy file of shape (texts, dim) written atomically (nothing appears on error). Bad\n"+
		"input stops with an error naming the line.")
	model := fs.String("model", "", "HF BERT model folder: config.json, model.safetensors, tokenizer.json or vocab.txt (required)")
	prefix := fs.String("prefix", "", `text prepended to every input (e5: "query: " or "passage: ")`)
	maxLen := fs.Int("max-length", 256, "tokens per text at most, [CLS] and [SEP] included (right truncation)")
	batch := fs.Int("batch-size", 64, "texts per forward pass (texts are length-sorted within each chunk of 4096)")
	pooling := fs.String("pooling", "", "mean or cls; default from the model's 1_Pooling/config.json, else mean")
	noNorm := fs.Bool("no-normalize", false, "write pooled vectors without L2 normalization")
	threads := fs.Int("threads", 0, "threads of a forward pass (the Linears' own thread team and OpenMP's row-wise ops; no BLAS); 0 = all cores")
	precision := fs.String("precision", "fp16", bert.PrecisionHelp)
	in := fs.String("in", "-", "input file of JSON Lines strings; - reads stdin")
	npyPath := fs.String("npy", "", "write a .npy file here instead of JSON Lines on stdout")
	load := gpuEncoderFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	case *model == "":
		return errors.New("--model is required (see --help)")
	case *batch <= 0:
		return fmt.Errorf("--batch-size %d: want > 0", *batch)
	case *maxLen < 2:
		return fmt.Errorf("--max-length %d: want >= 2", *maxLen)
	case *threads < 0:
		return fmt.Errorf("--threads %d: want >= 0", *threads)
	}
	enc, err := load(*model, bert.Options{MaxLength: *maxLen, BatchSize: *batch, Pooling: *pooling,
		SkipNormalize: *noNorm, Threads: *threads, Precision: bert.Precision(*precision)}, os.Stderr)
	if err != nil {
		return err
	}
	defer enc.Close()
	src, closer, err := jsonl.Open(*in)
	if err != nil {
		return err
	}
	defer closer.Close()
	if *npyPath == "" {
		return enc.EncodeJSONL(os.Stdout, src, *prefix)
	}
	return enc.EncodeNPY(*npyPath, src, *prefix)
}
