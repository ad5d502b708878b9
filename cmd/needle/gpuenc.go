package main

import (
	"flag"
	"io"

	"needle/encoder/bert"
)

// The --gpu flag of encode and build (serve's --gpu covers the index and the query encoder):
// the same modes as serve's (gpuMode), on GPU 0.

const encodeGPUUsage = "encode on GPU 0 in fp16 (cuBLAS GEMMs + needle's kernels; --batch-size then defaults to 512): " +
	"--gpu uses it when it can, else says why in one line and encodes on the CPU; --gpu=require fails instead"

// encoderLoader loads the encoder of a command: on the GPU or the CPU as its --gpu says.
type encoderLoader func(dir string, opt bert.Options, log io.Writer) (*bert.Encoder, error)

// gpuEncoderFlags registers --gpu on fs; load then opens the encoder accordingly, with a
// batch size of 0 (the encoder's default for its device) unless --batch-size was given.

func gpuEncoderFlags(fs *flag.FlagSet) (load encoderLoader) {
	var mode string
	fs.Var(gpuMode{&mode}, "gpu", encodeGPUUsage)
	return func(dir string, opt bert.Options, log io.Writer) (*bert.Encoder, error) {
		if mode != "" && !flagGiven(fs, "batch-size") {
			opt.BatchSize = 0
		}
		return bert.LoadOn(dir, opt, mode, 0, log)
	}
}

// flagGiven reports whether the command line set flag name of fs (after Parse).
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(fl *flag.Flag) { given = given || fl.Name == name })
	return given
}
