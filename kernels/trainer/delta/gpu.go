package delta

import (
	"embed"
	"errors"
	"fmt"
	"unsafe"

	"needle/cuda"
)

// ptxFiles is the ptx/ folder, where `make native` writes delta.cu compiled by clang-16 to
// sm_80 PTX and by nvcc to a fatbin (kernels/CMakeLists.txt) before go build embeds it.
//
//go:embed ptx
var ptxFiles embed.FS

const kernelStem = "delta" // the images of delta.cu in ptx/ (cuda.LoadKernels)

// cudaBlock is the threads per block of every launch; cudaTile the elements one block of the
// count and write kernels owns (delta.cu: blockDim.x * NL_DELTA_ITEMS).
const (
	cudaBlock = 256
	cudaTile  = cudaBlock * 8
)

// gpuKernels are one element width's entry points of delta.cu.
type gpuKernels struct{ count, write, apply *cuda.Function }

// GPU runs Encode and Apply with delta.cu on tensors already in device memory (the trainer's
// weights live there). Safe for concurrent use (package cuda serializes device work).
type GPU struct {
	dev   *cuda.Device
	mod   *cuda.Module
	byLen map[int]gpuKernels // by element size: 2 (bf16/fp16 bits) or 4 (fp32 bits)
}

// NewGPU loads the embedded kernels on dev (the fatbin, else the PTX).
func NewGPU(dev *cuda.Device) (*GPU, error) {
	mod, err := dev.LoadKernels(ptxFiles, kernelStem)
	if err != nil {
		return nil, err
	}
	g := &GPU{dev: dev, mod: mod, byLen: map[int]gpuKernels{}}
	for size, bits := range map[int]int{2: 16, 4: 32} {
		var k gpuKernels
		for _, f := range []struct {
			fn   **cuda.Function
			name string
		}{{&k.count, "nl_cuda_delta_count"}, {&k.write, "nl_cuda_delta_write"}, {&k.apply, "nl_cuda_delta_apply"}} {
			if *f.fn, err = mod.Function(fmt.Sprintf("%s%d", f.name, bits)); err != nil {
				return nil, errors.Join(err, mod.Unload())
			}
		}
		g.byLen[size] = k
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
	k := g.byLen[elemSize]
	is := IndexSizeFor(n)
	*dst = Sparse{Len: n, ElemSize: elemSize, IndexSize: is, Indices: dst.Indices[:0], Values: dst.Values[:0]}
	if n == 0 {
		return nil
	}
	tiles := (n + cudaTile - 1) / cudaTile
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
	counts, err := alloc(4 * tiles)
	if err != nil {
		return err
	}
	grid, block := cuda.Dim3{X: uint32(tiles), Y: 1, Z: 1}, cuda.Dim3{X: cudaBlock, Y: 1, Z: 1}
	if err := k.count.Launch(grid, block, oldBits, newBits, n, counts); err != nil {
		return err
	}
	// Tile counts -> exclusive prefix sums on the host: tiles is n/2048, small next to n.
	hostCounts := make([]uint32, tiles)
	if err := counts.Download(unsafe.Pointer(&hostCounts[0]), 4*int(tiles)); err != nil {
		return err
	}
	offsets := make([]uint64, tiles)
	var total uint64
	for i, c := range hostCounts {
		offsets[i] = total
		total += uint64(c)
	}
	dOffsets, err := alloc(8 * tiles)
	if err != nil {
		return err
	}
	if err := dOffsets.Upload(unsafe.Pointer(&offsets[0]), 8*int(tiles)); err != nil {
		return err
	}
	idx, err := alloc(int64(total) * int64(is))
	if err != nil {
		return err
	}
	vals, err := alloc(int64(total) * int64(elemSize))
	if err != nil {
		return err
	}
	if err := k.write.Launch(grid, block, oldBits, newBits, n, dOffsets, idx, int32(is), vals); err != nil {
		return err
	}
	dst.Indices = grow(dst.Indices, int64(total)*int64(is))[:int64(total)*int64(is)]
	dst.Values = grow(dst.Values, int64(total)*int64(elemSize))[:int64(total)*int64(elemSize)]
	if total == 0 {
		return nil
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
	// apply_entries strides over the entries, so the grid only needs to fill the device.
	blocks := min((nnz+cudaBlock-1)/cudaBlock, 1<<16)
	return g.byLen[s.ElemSize].apply.Launch(cuda.Dim3{X: uint32(blocks), Y: 1, Z: 1}, cuda.Dim3{X: cudaBlock, Y: 1, Z: 1},
		base, idx, int32(s.IndexSize), vals, nnz)
}
