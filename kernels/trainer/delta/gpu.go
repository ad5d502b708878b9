package delta

/*
#cgo CFLAGS: -I${SRCDIR}/../../..
#include "delta_gpu.h"
*/
import "C"

import (
	"embed"
	"unsafe"

	"needle/cuda"
)

// ptxFiles is the ptx/ folder, where `make native` writes delta.cu compiled by clang-16 to
// sm_80 PTX and by nvcc to a fatbin (kernels/CMakeLists.txt) before go build embeds it.
//
//go:embed ptx
var ptxFiles embed.FS

const kernelStem = "delta" // the images of delta.cu in ptx/ (cuda.LoadKernels)

// cudaTile is the elements one block of the count and write kernels owns (delta_launch.h).
const cudaTile = C.NL_DELTA_TILE

// GPU runs Encode and Apply with delta.cu on tensors already in device memory (the trainer's
// weights live there), launched by delta_gpu.c (the launcher libneedle.so runs too). Safe for
// concurrent use (the host core serializes device work).
type GPU struct {
	dev *cuda.Device
	mod *cuda.Module
	k   C.nl_delta_gpu
}

// NewGPU loads the embedded kernels on dev (the fatbin, else the PTX).
func NewGPU(dev *cuda.Device) (*GPU, error) {
	g := &GPU{dev: dev}
	var err error
	g.mod, err = dev.LoadKernels(ptxFiles, kernelStem, func(mod *cuda.Module) error {
		return cuda.Call(func(e unsafe.Pointer, n int) int {
			return int(C.nl_delta_gpu_init(&g.k, (*C.nl_module)(mod.Handle()), (*C.char)(e), C.size_t(n)))
		})
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// Close unloads the module (the device stays open: it is the caller's).
func (g *GPU) Close() error { return g.mod.Unload() }

// Encode is Encode on the device: oldBits and newBits hold n elements of elemSize bytes each;
// dst receives the changed elements in host memory, in the same order and layout as Encode's.
func (g *GPU) Encode(dst *Sparse, oldBits, newBits *cuda.Buffer, n int64, elemSize int) error {
	if err := CheckElemSize(elemSize); err != nil {
		return err
	}
	is := IndexSizeFor(n)
	*dst = Sparse{Len: n, ElemSize: elemSize, IndexSize: is, Indices: dst.Indices[:0], Values: dst.Values[:0]}
	if n == 0 {
		return nil
	}
	var bufs []*cuda.Buffer
	defer func() {
		for _, b := range bufs {
			b.Free()
		}
	}()
	alloc := func(size int64) (*cuda.Buffer, error) {
		b, err := g.dev.Alloc(int(size))
		if err == nil {
			bufs = append(bufs, b)
		}
		return b, err
	}
	workBytes := int64(C.nl_delta_gpu_work_bytes(C.int64_t(n)))
	work, err := alloc(workBytes)
	if err != nil {
		return err
	}
	old, cur, es := C.uint64_t(oldBits.Addr(0)), C.uint64_t(newBits.Addr(0)), C.int32_t(elemSize)
	var total int64
	if err := cuda.Call(func(e unsafe.Pointer, m int) int {
		total = int64(C.nl_delta_gpu_count(&g.k, old, cur, C.int64_t(n), es, C.uint64_t(work.Addr(0)),
			C.int64_t(workBytes), 0, (*C.char)(e), C.size_t(m)))
		return int(min(total, 0))
	}); err != nil {
		return err
	}
	dst.Indices = grow(dst.Indices, total*int64(is))[:total*int64(is)]
	dst.Values = grow(dst.Values, total*int64(elemSize))[:total*int64(elemSize)]
	if total == 0 {
		return g.dev.Synchronize() // the offsets' upload, before work is freed
	}
	idx, err := alloc(total * int64(is))
	if err != nil {
		return err
	}
	vals, err := alloc(total * int64(elemSize))
	if err != nil {
		return err
	}
	// Queued on the default stream; the downloads wait for it.
	if err := cuda.Call(func(e unsafe.Pointer, m int) int {
		return int(C.nl_delta_gpu_write(&g.k, old, cur, C.int64_t(n), es, C.uint64_t(work.Addr(0)), C.int64_t(workBytes),
			C.uint64_t(idx.Addr(0)), C.int32_t(is), C.uint64_t(vals.Addr(0)), 0, (*C.char)(e), C.size_t(m)))
	}); err != nil {
		return err
	}
	if err := idx.Download(unsafe.Pointer(&dst.Indices[0]), len(dst.Indices)); err != nil {
		return err
	}
	return vals.Download(unsafe.Pointer(&dst.Values[0]), len(dst.Values))
}

// Apply is Apply on the device: it checks s against a tensor of baseBytes bytes (Check), then
// writes it into base, which holds that tensor; on error base is untouched.
func (g *GPU) Apply(base *cuda.Buffer, baseBytes int, s *Sparse) error {
	if err := s.Check(baseBytes); err != nil {
		return err
	}
	nnz := s.Count()
	if nnz == 0 {
		return nil
	}
	var bufs []*cuda.Buffer
	defer func() {
		for _, b := range bufs {
			b.Free()
		}
	}()
	upload := func(b []byte) (*cuda.Buffer, error) {
		d, err := g.dev.Alloc(len(b))
		if err != nil {
			return nil, err
		}
		bufs = append(bufs, d)
		return d, d.Upload(unsafe.Pointer(&b[0]), len(b))
	}
	idx, err := upload(s.Indices)
	if err != nil {
		return err
	}
	vals, err := upload(s.Values)
	if err != nil {
		return err
	}
	if err := cuda.Call(func(e unsafe.Pointer, m int) int {
		return int(C.nl_delta_gpu_apply(&g.k, C.uint64_t(base.Addr(0)), C.int32_t(s.ElemSize), C.uint64_t(idx.Addr(0)),
			C.int32_t(s.IndexSize), C.uint64_t(vals.Addr(0)), C.int64_t(nnz), 0, (*C.char)(e), C.size_t(m)))
	}); err != nil {
		return err
	}
	return g.dev.Synchronize() // before idx and vals are freed
}
