package logprob

/*
#cgo CFLAGS: -I${SRCDIR}/../../..
#include "logprob_gpu.h"
*/
import "C"

import (
	"embed"
	"unsafe"

	"needle/cuda"
)

// ptxFiles is the ptx/ folder, where `make native` writes logprob.cu compiled by clang-16 to
// sm_80 PTX and by nvcc to a fatbin (kernels/CMakeLists.txt) before go build embeds it.
//
//go:embed ptx
var ptxFiles embed.FS

const kernelStem = "logprob" // the images of logprob.cu in ptx/ (cuda.LoadKernels)

// GPU runs Compute's op on a CUDA device with logprob.cu, launched by logprob_gpu.c (the
// launcher libneedle.so runs too): one block of C.NL_LOGPROB_BLOCK threads per row. Safe for
// concurrent use (the host core serializes device work). Callers fall back to Compute on any
// error.
type GPU struct {
	dev *cuda.Device
	mod *cuda.Module
	k   C.nl_logprob_gpu
}

// NewGPU loads the embedded kernels on dev (the fatbin, else the PTX).
func NewGPU(dev *cuda.Device) (*GPU, error) {
	g := &GPU{dev: dev}
	var err error
	g.mod, err = dev.LoadKernels(ptxFiles, kernelStem, func(mod *cuda.Module) error {
		return cuda.Call(func(e unsafe.Pointer, n int) int {
			return int(C.nl_logprob_gpu_init(&g.k, (*C.nl_module)(mod.Handle()), (*C.char)(e), C.size_t(n)))
		})
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// Close unloads the module (the device stays open: it is the caller's).
func (g *GPU) Close() error { return g.mod.Unload() }

// Compute is Compute on the GPU: inputs are copied to the device, outputs back (opt.Threads is
// unused).
func (g *GPU) Compute(x Logits, labels []int64, opt Options, out Output) error {
	if err := checkArgs(x, labels, opt, out); err != nil {
		return err
	}
	if x.Rows == 0 {
		return nil
	}
	n := x.Rows
	var bufs []*cuda.Buffer
	defer func() {
		for _, b := range bufs {
			b.Free()
		}
	}()
	upload := func(p unsafe.Pointer, size int) (*cuda.Buffer, error) {
		b, err := g.dev.Alloc(size)
		if err != nil {
			return nil, err
		}
		bufs = append(bufs, b)
		if p != nil {
			err = b.Upload(p, size)
		}
		return b, err
	}
	dLogits, err := upload(ptr(x.Data), len(x.Data))
	if err != nil {
		return err
	}
	dLabels, err := upload(ptr(labels), 8*n)
	if err != nil {
		return err
	}
	outs := [3][]float32{out.Logprob, out.Entropy, out.LSE}
	var dOut [3]*cuda.Buffer
	for i, o := range outs {
		if o != nil {
			if dOut[i], err = upload(nil, 4*n); err != nil {
				return err
			}
		}
	}
	// Queued on the default stream; the downloads below wait for it.
	if err := g.launch(x.DType, n, x.Vocab, dLogits, dLabels, opt, dOut); err != nil {
		return err
	}
	for i, o := range outs {
		if o != nil {
			if err := dOut[i].Download(unsafe.Pointer(&o[0]), 4*n); err != nil {
				return err
			}
		}
	}
	return nil
}

// launch queues the kernel of dtype on the default stream, on device memory: rows x vocab
// logits and rows labels in, the log-prob, entropy and LSE floats out (a nil output buffer is
// not written).
func (g *GPU) launch(dtype DType, rows, vocab int, logits, labels *cuda.Buffer, opt Options, outs [3]*cuda.Buffer) error {
	var addr [3]uint64 // 0: a null device pointer, that output not wanted
	for i, o := range outs {
		if o != nil {
			addr[i] = o.Addr(0)
		}
	}
	return cuda.Call(func(e unsafe.Pointer, n int) int {
		return int(C.nl_logprob_gpu_run(&g.k, C.int32_t(dtype), C.uint64_t(logits.Addr(0)), C.int64_t(rows),
			C.int64_t(vocab), C.uint64_t(labels.Addr(0)), C.float(opt.Temperature), C.int64_t(opt.IgnoreIndex),
			C.uint64_t(addr[0]), C.uint64_t(addr[1]), C.uint64_t(addr[2]), 0, (*C.char)(e), C.size_t(n)))
	})
}
