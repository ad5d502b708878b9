package main

import (
	"io"

	"needle/encoder/bert"
)

// The --gpu flag of encode and build (serve's --gpu covers the index and the query encoder):
// the same modes as serve's (bert.GPUFlag), on GPU 0.

const encodeGPUUsage = "encode on GPU 0 in fp16 (cuBLAS GEMMs + needle's kernels; --batch-size then defaults to 512): " +
	"--gpu uses it when it can, else says why in one line and encodes on the CPU; --gpu=require fails instead"

// encoderLoader loads the encoder of a command: on the GPU or the CPU as its --gpu says.
type encoderLoader func(dir string, opt bert.Options, log io.Writer) (*bert.Encoder, error)

// gpuEncoderFlags registers --gpu on fs; load then opens the encoder accordingly, with a
// batch size of 0 (the encoder's default for its device) unless --batch-size was given.

func gpuEncoderFlags(fs *flagSet) (load encoderLoader) {
	var mode string
	fs.Var(bert.GPUFlag{Mode: &mode}, "gpu", encodeGPUUsage)
	return func(dir string, opt bert.Options, log io.Writer) (*bert.Encoder, error) {
		if mode != "" && !fs.given("batch-size") {
			opt.BatchSize = 0
		}
		return bert.LoadOn(dir, opt, mode, 0, log)
	}
}
