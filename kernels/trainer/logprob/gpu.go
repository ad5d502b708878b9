package logprob

import (
	"embed"
	"errors"
	"unsafe"

	"needle/cuda"
)

// ptxFiles is the ptx/ folder, where `make native` writes logprob.cu compiled by clang-16 to
// sm_80 PTX and by nvcc to a fatbin (kernels/CMakeLists.txt) before go build embeds it.
//
//go:embed ptx
var ptxFiles embed.FS

const kernelStem = "logprob" // the images of logprob.cu in ptx/ (cuda.LoadKernels)

// cudaBlock is the threads per block of the launch (logprob.cu NL_CUDA_BLOCK).
const cudaBlock = 256

var cudaKernels = map[DType]string{F32: "nl_cuda_logprob_f32", F16: "nl_cuda_logprob_f16", BF16: "nl_cuda_logprob_bf16"}

// GPU runs Compute's op on a CUDA device with logprob.cu: one block per row. Safe for concurrent
// use (package cuda serializes device work). Callers fall back to Compute on any error.
type GPU struct {
	dev *cuda.Device
	mod *cuda.Module
	fns map[DType]*cuda.Function
}

// NewGPU loads the embedded kernels on dev (the fatbin, else the PTX).
func NewGPU(dev *cuda.Device) (*GPU, error) {
	mod, err := dev.LoadKernels(ptxFiles, kernelStem)
	if err != nil {
		return nil, err
	}
	g := &GPU{dev: dev, mod: mod, fns: map[DType]*cuda.Function{}}
	for dt, name := range cudaKernels {
		if g.fns[dt], err = mod.Function(name); err != nil {
			return nil, errors.Join(err, mod.Unload())
		}
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

// launch runs the kernel of dtype on device memory: rows x vocab logits and rows labels in,
// the log-prob, entropy and LSE floats out (a nil output buffer is not written). It returns when
// the kernel has finished.
func (g *GPU) launch(dtype DType, rows, vocab int, logits, labels *cuda.Buffer, opt Options, outs [3]*cuda.Buffer) error {
	args := []any{logits, int64(vocab), labels, 1 / opt.Temperature, opt.IgnoreIndex}
	for _, o := range outs {
		if o == nil {
			args = append(args, uint64(0)) // a null device pointer: output not wanted
		} else {
			args = append(args, o)
		}
	}
	return g.fns[dtype].Launch(cuda.Dim3{X: uint32(rows), Y: 1, Z: 1}, cuda.Dim3{X: cudaBlock, Y: 1, Z: 1}, args...)
}
