// Package flatscangpu is the GPU twin of kernels/search/flatscan: the kernels of an exact flat
// scan on NVIDIA GPUs (flatscangpu.cu: each query's top-k keys over tiles of cuBLAS scores,
// FAISS's tie rule, rows prepared or made on the device, a read-bandwidth probe) with typed
// launchers, the host half of the top-k (keys.go) and the device's measured peaks. The GPU
// flat index that shards, loads and searches with them is index/flatgpu.
//
// A key is a hit packed so that a larger key is a better hit: ordered score << 32 |
// 0xffffffff - label, 0 = no hit. Launchers take device addresses (cuda.Buffer.Addr); every
// launcher but RandomRows queues its kernel on the default stream without waiting.
package flatscangpu

import (
	"embed"
	"math"
	"time"

	"needle/cuda"
)

// ptxFiles is the ptx/ folder, where `make native` writes flatscangpu.cu compiled by clang-16
// to sm_80 PTX and by nvcc to a fatbin (cmake/native_parts.cmake) before go build embeds it.
//
//go:embed ptx
var ptxFiles embed.FS

const kernelStem = "flatscangpu" // the images of flatscangpu.cu in ptx/ (cuda.LoadKernels)

// Launch shapes and limits.
const (
	Block      = 256       // threads per block of every kernel
	MaxK       = 8192      // the largest k a search takes (SortKeys sorts up to 2*MaxK keys per query)
	MaxGridX   = 1<<31 - 1 // gridDim.x limit (every GPU since sm_30): RandomRows launches a block per row
	busyBlocks = 264       // blocks that keep a GPU busy (two per SM of an H100)
	minSegment = 16384     // scores per segment at least
)

// Kernels are flatscangpu.cu's kernels loaded on one device.
type Kernels struct {
	mod                                      *cuda.Module
	tile, merge, sort, prepare, random, read *cuda.Function
}

// Load loads the kernels onto dev (its fatbin, else its PTX, as cuda.LoadKernels picks).
func Load(dev *cuda.Device) (*Kernels, error) {
	k := &Kernels{}
	var err error
	k.mod, err = dev.LoadKernels(ptxFiles, kernelStem, func(mod *cuda.Module) (err error) {
		for _, f := range []struct {
			fn   **cuda.Function
			name string
		}{{&k.tile, "nl_topk_tile"}, {&k.merge, "nl_topk_merge"}, {&k.sort, "nl_topk_sort"}, {&k.prepare, "nl_rows_prepare"},
			{&k.random, "nl_rows_random"}, {&k.read, "nl_read"}} {
			if *f.fn, err = mod.Function(f.name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return k, nil
}

// Unload releases the module.
func (k *Kernels) Unload() { k.mod.Unload() }

func grid(x, y int) cuda.Dim3 { return cuda.Dim3{X: uint32(x), Y: uint32(y), Z: 1} }

var threads = cuda.Dim3{X: Block, Y: 1, Z: 1}

// PrepareRows reads n rows of dim fp32 values at src and writes them as fp16 at dst16 and
// their squared norms at norms (either address 0: not written).
func (k *Kernels) PrepareRows(n int, src uint64, dim int, dst16, norms uint64) error {
	return k.prepare.Enqueue(grid(n, 1), threads, src, int64(dim), dst16, norms)
}

// RandomRows fills n rows of dim seeded pseudo-random values in [-1, 1), rows row0.. of the
// sequence, into dst16 (fp16) or dst32 (fp32), with squared norms at norms (0: none), and
// waits for them. n <= MaxGridX.
func (k *Kernels) RandomRows(n int64, seed uint64, row0 int64, dim int, dst16, dst32, norms uint64) error {
	return k.random.Launch(grid(int(n), 1), threads, seed, row0, int64(dim), dst16, dst32, norms)
}

// TileTopK selects each of nq queries' best keys of one tile of scores (column-major, ld
// scores per query, n of them, rows base..base+n), merged with the previous tiles' keys at
// prev (0: none), in segs segments of seglen scores each (Segments); xnorm and qnorm are the
// rows' and queries' squared norms for L2 (0 for inner product). It writes cands keys per
// query, width slots apart, at out.
func (k *Kernels) TileTopK(nq, segs int, scores uint64, ld, n, seglen, base int64, xnorm, qnorm, prev uint64, cands int,
	out uint64, width int) error {
	return k.tile.Enqueue(grid(nq, segs), threads, scores, ld, n, seglen, base, xnorm, qnorm, prev, int32(cands), out, int64(width))
}

// MergeTopK selects each of nq queries' best cands keys of count keys at in (a tile's
// segments) into out, width slots apart.
func (k *Kernels) MergeTopK(nq int, in uint64, count int64, cands int, out uint64, width int) error {
	return k.merge.Enqueue(grid(nq, 1), threads, in, count, int32(cands), out, int64(width))
}

// SortKeys sorts each of nq queries' width keys at keys, best first (width a power of two).
func (k *Kernels) SortKeys(nq int, keys uint64, width int) error {
	return k.sort.Enqueue(grid(nq, 1), threads, keys, int64(width))
}

// Candidates is how many keys per query the device selects for k hits: k for L2, 2k for
// inner product (Finish needs them to apply FAISS's tie rule).
func Candidates(k int, l2 bool) int {
	if l2 {
		return k
	}
	return 2 * k
}

// Width is the key slots per query for n candidates: a power of two >= n, as SortKeys needs.
func Width(n int) int {
	w := 1
	for w < n {
		w *= 2
	}
	return w
}

// Segments is how many blocks select each query's top-k of an m-row tile: enough for a busy
// GPU in all, each with at least minSegment scores, their keys (width per segment) within
// keyBytes.
func Segments(nq int, m int64, width, keyBytes int) int {
	segs := min((busyBlocks+nq-1)/nq, int((m+minSegment-1)/minSegment), keyBytes/8/width/nq)
	return max(segs, 1)
}

// Peaks are a GPU's own limits, measured: what a benchmark reports its share of.
type Peaks struct {
	ReadGBps   float64 // device memory read bandwidth (nl_read over 2 GiB)
	GemmTFLOPs float64 // cuBLAS fp16-in fp32-accumulate GEMM, 8192^3 (GemmEx as a search calls it)
}

// MeasurePeaks measures dev's read bandwidth with these kernels and blas's GEMM rate: the best
// of five runs of each yardstick.
func (k *Kernels) MeasurePeaks(dev *cuda.Device, blas *cuda.BLAS) (Peaks, error) {
	const words = 1 << 28 // 2 GiB read
	var bufs []*cuda.Buffer
	defer func() {
		for _, b := range bufs {
			b.Free()
		}
	}()
	for _, size := range []int{words * 8, 8} { // the words, and nl_read's out
		b, err := dev.Alloc(size)
		if err != nil {
			return Peaks{}, err
		}
		bufs = append(bufs, b)
	}
	read := time.Duration(math.MaxInt64)
	for range 5 {
		start := time.Now()
		if err := k.read.Launch(grid(4096, 1), threads, bufs[0], int64(words), bufs[1]); err != nil {
			return Peaks{}, err
		}
		read = min(read, time.Since(start))
	}
	gemm, err := blas.GemmPeak()
	if err != nil {
		return Peaks{}, err
	}
	return Peaks{ReadGBps: words * 8 / read.Seconds() / 1e9, GemmTFLOPs: gemm}, nil
}
