package main

import (
	"fmt"
	"os"

	"needle/doctor"
)

func init() {
	register(command{name: "doctor", summary: "what needle will use on this machine and why; with --index/--model, whether they load and agree", run: runDoctor})
}

func runDoctor(args []string) error {
	var o doctor.Options
	fs := newFlagSet("doctor", "[--index DIR|FILE] [--model DIR] [--gpu] [--json]\n\n"+
		"Reports the CPU and the SIMD level kernels use (and why), OpenBLAS's version and kernels (and\n"+
		"known-bad combinations), threads, memory, the GPUs, driver and cuBLAS (or why none), and with\n"+
		"--index/--model whether they load and agree as `needle serve` would use them. Exits 1 when\n"+
		"something needed is missing (docs/doctor.md).")
	fs.StringVar(&o.Index, "index", "", "a needle build folder, compact form folder or bare FAISS index file to check")
	fs.StringVar(&o.Model, "model", "", "an encoder model folder to load (default: the index manifest's)")
	fs.BoolVar(&o.GPU, "gpu", false, "a GPU is needed: no usable GPU or cuBLAS is a failure")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	r := doctor.Run(o)
	write := r.WriteText
	if *asJSON {
		write = r.WriteJSON
	}
	if err := write(os.Stdout); err != nil {
		return err
	}
	if r.Failed() {
		return fmt.Errorf("something needed is missing")
	}
	return nil
}
