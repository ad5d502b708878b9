// Package flatgpu is the GPU twin of index/flat: an exact flat index on NVIDIA GPUs, an
// engine.Index. The vectors live on the devices in fp16 (or fp32), rows split in contiguous
// shards over the GPUs given; a search is, per shard and per tile of rows, one cuBLAS GEMM
// (fp32 accumulate) and the top-k kernels of kernels/search/flatscangpu, whose keys are
// merged across shards on the host and returned in FAISS's order. Scores are inner products (or L2 distances) of the fp16-rounded vectors
// and queries: they differ from FAISS's fp32 search by fp16 rounding.
//
// Load streams a FAISS IndexFlatIP/IndexFlatL2 file (or a `needle build` folder holding one)
// through a pinned staging buffer: host memory stays bounded by it whatever the index size,
// and rows are converted to fp16 on the device. Device memory for searching is reserved at
// load, so a search allocates nothing; a failed CUDA call marks its device unhealthy and
// every later Search fails with that error (the server answers 503).
package flatgpu

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"needle/cuda"
	"needle/faissgo"
	"needle/index/indexdir"
	"needle/internal/progress"
	"needle/internal/prom"
	"needle/kernels/search/flatscangpu"
)

// MaxK is the largest k Search takes.
const MaxK = flatscangpu.MaxK

// Work space sizes.
const (
	scoreBudget  = 256 << 20 // bytes of one GEMM tile's scores (queries x rows x fp32)
	keyBudget    = 256 << 20 // bytes of the two candidate key buffers of a query chunk
	segBudget    = 64 << 20  // bytes of the keys of a tile's segments (few queries)
	stagingBytes = 64 << 20  // pinned host and device staging for loading
	maxQueries   = 4096      // queries per device pass (a longer batch is split)
)

// ErrNoMemory is wrapped by the error of a load that does not fit a GPU's free memory.
var ErrNoMemory = errors.New("not enough GPU memory")

// Options say where and how the index is held.
type Options struct {
	// Devices are the ordinals (among CUDA_VISIBLE_DEVICES) of the GPUs to shard rows over;
	// nil: all visible GPUs.
	Devices []int
	// FP32 keeps the vectors in fp32 on the device (twice the memory; no fp16 rounding).
	FP32 bool
	// Progress receives the load's progress bar (nil: none).
	Progress io.Writer
}

// Index is a loaded GPU flat index. Search is safe for concurrent callers (they take turns:
// the work space is reserved once per device).
type Index struct {
	dim    int
	ntotal int64
	l2     bool
	fp32   bool
	shards []*shard

	bar      *progress.Bar // while loading, when Options.Progress is set
	mu       sync.Mutex    // one search at a time
	searches atomic.Uint64
	nanos    atomic.Int64 // total search time
}

// shard is the rows [first, first+rows) on one device, with its kernels and work space.
type shard struct {
	dev         *cuda.Device
	blas        *cuda.BLAS
	kernels     *flatscangpu.Kernels
	first, rows int64
	x           *cuda.Buffer // rows x dim, fp16 or fp32
	norms       *cuda.Buffer // squared row norms (L2 only)
	q32, q16    *cuda.Buffer // a query chunk: fp32 as given, fp16 as searched (fp16 indexes)
	qnorms      *cuda.Buffer
	scores      *cuda.Buffer
	keys        [2]*cuda.Buffer
	segs        *cuda.Buffer // a tile's segment keys
	host        []uint64     // downloaded keys of a query chunk
	bufs        []*cuda.Buffer
}

// Dim is the vector dimension.
func (x *Index) Dim() int { return x.dim }

// Ntotal is the number of rows.
func (x *Index) Ntotal() int64 { return x.ntotal }

// Metric is the index's metric (faissgo.IP or faissgo.L2).
func (x *Index) Metric() faissgo.Metric {
	if x.l2 {
		return faissgo.L2
	}
	return faissgo.IP
}

// FlatFile returns the FAISS flat index file of path (the file itself, or the index of a
// `needle build` folder) and where its vectors lie (faissgo.StatFlat checks the file whole).
func FlatFile(path string) (string, faissgo.FlatVectors, error) {
	file, err := indexdir.IndexFile(path)
	if err != nil {
		return "", faissgo.FlatVectors{}, err
	}
	vec, err := faissgo.StatFlat(file)
	if err != nil {
		return "", vec, err
	}
	if vec.Ntotal >= math.MaxUint32 {
		return "", vec, fmt.Errorf("flatgpu: %s has %d rows; the GPU index holds fewer than 2^32", file, vec.Ntotal)
	}
	return file, vec, nil
}

// Load reads the flat index at path (a FAISS file or a `needle build` folder) onto the GPUs
// of opt. Without a GPU or cuBLAS the error wraps cuda.ErrNoDevice or cuda.ErrNoCublas; when
// a shard does not fit its GPU, ErrNoMemory with what was needed and what was free.
func Load(path string, opt Options) (*Index, error) {
	file, vec, err := FlatFile(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return build(vec.Dim, vec.Ntotal, vec.Metric, opt, func(x *Index, s *shard) error {
		if err := x.fill(s, f, vec.Offset); err != nil {
			return fmt.Errorf("flatgpu: loading %s onto GPU %d: %w", file, s.dev.Ordinal(), err)
		}
		return nil
	})
}

// Synthetic makes an index of rows seeded pseudo-random vectors (uniform in [-1, 1)) on the
// GPUs themselves, for benchmarks without a file: up to 2^31 - 1 rows, as one launch fills a
// shard with a block per row.
func Synthetic(rows int64, dim int, metric faissgo.Metric, seed uint64, opt Options) (*Index, error) {
	if rows < 0 || rows > flatscangpu.MaxGridX || dim <= 0 {
		return nil, fmt.Errorf("flatgpu: synthetic index of %d rows x %d: need 0 <= rows <= %d (a block per row) and dim > 0", rows, dim, flatscangpu.MaxGridX)
	}
	return build(dim, rows, metric, opt, func(x *Index, s *shard) error {
		var dst16, dst32, norms uint64
		if x.fp32 {
			dst32 = s.x.Addr(0)
		} else {
			dst16 = s.x.Addr(0)
		}
		if x.l2 {
			norms = s.norms.Addr(0)
		}
		if s.rows == 0 {
			return nil
		}
		err := s.kernels.RandomRows(s.rows, seed, s.first, dim, dst16, dst32, norms)
		if x.bar != nil {
			x.bar.Add(s.rows)
		}
		return err
	})
}

// build opens the shards of a dim x ntotal index over opt's GPUs and fills each with fill.
func build(dim int, ntotal int64, metric faissgo.Metric, opt Options, fill func(*Index, *shard) error) (_ *Index, err error) {
	devices := opt.Devices
	if devices == nil {
		n, err := cuda.Count()
		if err != nil {
			return nil, err
		}
		for i := range n {
			devices = append(devices, i)
		}
	}
	if len(devices) == 0 {
		return nil, fmt.Errorf("flatgpu: %w: no GPU visible (CUDA_VISIBLE_DEVICES=%q)", cuda.ErrNoDevice, os.Getenv("CUDA_VISIBLE_DEVICES"))
	}
	x := &Index{dim: dim, ntotal: ntotal, l2: metric == faissgo.L2, fp32: opt.FP32}
	defer func() {
		if err != nil {
			x.Close()
		}
	}()
	per := (ntotal + int64(len(devices)) - 1) / int64(len(devices))
	for i, ord := range devices {
		first := min(int64(i)*per, ntotal)
		s, err := x.openShard(ord, first, min(per, ntotal-first))
		if err != nil {
			return nil, err
		}
		x.shards = append(x.shards, s)
	}
	if opt.Progress != nil {
		x.bar = progress.Start(opt.Progress, progress.Options{Label: "rows to GPU", Total: ntotal})
		defer x.bar.Finish()
	}
	for _, s := range x.shards {
		if err := fill(x, s); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// elem is the bytes of one stored vector element.
func (x *Index) elem() int64 {
	if x.fp32 {
		return 4
	}
	return 2
}

// precision names how vectors are stored on the device.
func (x *Index) precision() string {
	if x.fp32 {
		return "fp32"
	}
	return "fp16"
}

// openShard opens device ord, checks that rows fit in its free memory and reserves the
// shard's matrix and work space.
func (x *Index) openShard(ord int, first, rows int64) (*shard, error) {
	dev, err := cuda.Open(ord)
	if err != nil {
		return nil, err
	}
	s := &shard{dev: dev, first: first, rows: rows}
	matrix := max(rows, 1) * int64(x.dim) * x.elem()
	work := int64(scoreBudget+keyBudget+segBudget+stagingBytes) + maxQueries*int64(x.dim)*6 + maxQueries*4 + rows*4
	free, total, err := dev.MemInfo()
	if err != nil {
		dev.Close()
		return nil, err
	}
	const gib = 1 << 30
	if uint64(matrix+work) > free {
		dev.Close()
		return nil, fmt.Errorf("flatgpu: %w on GPU %d (%s): %d rows x %d in %s need %.2f GiB plus %.2f GiB of work space, %.2f GiB of %.2f GiB free",
			ErrNoMemory, ord, dev.Name(), rows, x.dim, x.precision(),
			float64(matrix)/gib, float64(work)/gib, float64(free)/gib, float64(total)/gib)
	}
	if err := s.reserve(x, matrix); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// reserve loads the kernels and cuBLAS and allocates the shard's buffers.
func (s *shard) reserve(x *Index, matrix int64) error {
	var err error
	if s.blas, err = s.dev.NewBLAS(); err != nil {
		return err
	}
	if s.kernels, err = flatscangpu.Load(s.dev); err != nil {
		return err
	}
	alloc := func(size int64) (*cuda.Buffer, error) {
		b, err := s.dev.Alloc(int(size))
		if err == nil {
			s.bufs = append(s.bufs, b)
		}
		return b, err
	}
	type want struct {
		buf  **cuda.Buffer
		size int64
	}
	sizes := []want{
		{&s.x, matrix}, {&s.q32, maxQueries * int64(x.dim) * 4}, {&s.qnorms, maxQueries * 4},
		{&s.scores, scoreBudget}, {&s.keys[0], keyBudget / 2}, {&s.keys[1], keyBudget / 2}, {&s.segs, segBudget},
	}
	if !x.fp32 {
		sizes = append(sizes, want{&s.q16, maxQueries * int64(x.dim) * 2})
	}
	if x.l2 {
		sizes = append(sizes, want{&s.norms, max(s.rows, 1) * 4})
	}
	for _, b := range sizes {
		if *b.buf, err = alloc(b.size); err != nil {
			return err
		}
	}
	return nil
}

// fill streams the shard's rows from the file: read into pinned host memory, copy to the
// device, then (fp16) convert into the matrix and compute L2 norms there.
func (x *Index) fill(s *shard, f *os.File, offset int64) error {
	rowBytes := int64(x.dim) * 4
	chunkRows := max(stagingBytes/rowBytes, 1)
	host, err := s.dev.AllocHost(int(chunkRows * rowBytes))
	if err != nil {
		return err
	}
	defer host.Free()
	staging := s.x // fp32: rows go straight to their place
	if !x.fp32 {
		if staging, err = s.dev.Alloc(int(chunkRows * rowBytes)); err != nil {
			return err
		}
		defer staging.Free()
	}
	for r := int64(0); r < s.rows; r += chunkRows {
		n := min(chunkRows, s.rows-r)
		buf := host.Bytes[:n*rowBytes]
		if _, err := f.ReadAt(buf, offset+(s.first+r)*rowBytes); err != nil {
			return fmt.Errorf("reading rows %d..%d: %w", s.first+r, s.first+r+n, err)
		}
		at := 0
		if x.fp32 {
			at = int(r * rowBytes)
		}
		if err := staging.UploadAt(at, unsafe.Pointer(&buf[0]), len(buf)); err != nil {
			return err
		}
		var dst16, norms uint64
		if !x.fp32 {
			dst16 = s.x.Addr(int(r * int64(x.dim) * 2))
		}
		if x.l2 {
			norms = s.norms.Addr(int(r * 4))
		}
		if dst16 != 0 || norms != 0 {
			// Waited for: the staging buffers are refilled next.
			if err := s.kernels.PrepareRows(int(n), staging.Addr(at), x.dim, dst16, norms); err != nil {
				return err
			}
			if err := s.dev.Synchronize(); err != nil {
				return err
			}
		}
		if x.bar != nil {
			x.bar.Add(n)
		}
	}
	return nil
}

// Search finds the k best rows of each query of x (len(x)/Dim() queries), best first, in the
// caller's buffers; label -1 marks a missing hit. A query with a NaN or infinite value is
// an error naming it.
func (x *Index) Search(q []float32, k int, dist []float32, labels []int64) error {
	if len(q)%x.dim != 0 {
		return fmt.Errorf("flatgpu: search: %d floats is not a whole number of %d-dimensional queries", len(q), x.dim)
	}
	n := len(q) / x.dim
	if k <= 0 || k > MaxK {
		return fmt.Errorf("flatgpu: search: k=%d outside 1..%d", k, MaxK)
	}
	if len(dist) < n*k || len(labels) < n*k {
		return fmt.Errorf("flatgpu: search: result buffers hold %d distances and %d labels, need %d (n=%d, k=%d)", len(dist), len(labels), n*k, n, k)
	}
	for i, v := range q {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("flatgpu: search: query %d has %v at position %d", i/x.dim, v, i%x.dim)
		}
	}
	if n == 0 {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	start := time.Now()
	cands := flatscangpu.Candidates(k, x.l2)
	width := flatscangpu.Width(cands)
	chunk := min(maxQueries, keyBudget/2/8/width)
	lists := make([][]uint64, len(x.shards))
	var merged []uint64
	for c := 0; c < n; c += chunk {
		nc := min(chunk, n-c)
		errs := make([]error, len(x.shards))
		var wg sync.WaitGroup
		for i, s := range x.shards {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = x.searchShard(s, q[c*x.dim:(c+nc)*x.dim], nc, cands, width)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("flatgpu: search: %w", err)
		}
		for j := range nc {
			for i, s := range x.shards {
				lists[i] = s.host[j*width : (j+1)*width]
			}
			merged = flatscangpu.MergeShards(merged, lists, cands)
			flatscangpu.Finish(merged, k, x.l2, dist[(c+j)*k:(c+j+1)*k], labels[(c+j)*k:(c+j+1)*k])
		}
	}
	x.searches.Add(1)
	x.nanos.Add(int64(time.Since(start)))
	return nil
}

// searchShard leaves the sorted best cands keys of each of the nq queries in s.host (width
// slots per query). The GEMMs and kernels are queued on the default stream without host
// round trips; the final download waits for them (and reports their failures).
func (x *Index) searchShard(s *shard, q []float32, nq, cands, width int) error {
	if err := s.q32.Upload(unsafe.Pointer(&q[0]), len(q)*4); err != nil {
		return err
	}
	in, typ := s.q32, cuda.R32F
	var q16, qnorms uint64
	if !x.fp32 {
		in, typ, q16 = s.q16, cuda.R16F, s.q16.Addr(0)
	}
	if x.l2 {
		qnorms = s.qnorms.Addr(0)
	}
	if q16 != 0 || qnorms != 0 {
		if err := s.kernels.PrepareRows(nq, s.q32.Addr(0), x.dim, q16, qnorms); err != nil {
			return err
		}
	}
	tileRows := max(min(s.rows, int64(scoreBudget/4/nq)), 1)
	prev, out := uint64(0), s.keys[0]
	for t := int64(0); t < s.rows; t += tileRows {
		m := min(tileRows, s.rows-t)
		// Scores, column-major rows x queries = X[t:t+m] . Q^T: each query's m scores contiguous.
		err := s.blas.GemmEx(cuda.OpT, cuda.OpN, int(m), nq, x.dim, 1, s.x.Addr(int(t*int64(x.dim)*x.elem())), x.dim,
			in.Addr(0), x.dim, typ, 0, s.scores.Addr(0), int(m))
		if err != nil {
			return err
		}
		var xnorms uint64
		if x.l2 {
			xnorms = s.norms.Addr(int(t * 4))
		}
		segs := flatscangpu.Segments(nq, m, width, segBudget)
		tileOut := out
		if segs > 1 {
			tileOut = s.segs
		}
		err = s.kernels.TileTopK(nq, segs, s.scores.Addr(0), m, m, (m+int64(segs)-1)/int64(segs), s.first+t, xnorms, qnorms,
			prev, cands, tileOut.Addr(0), width)
		if err == nil && segs > 1 {
			err = s.kernels.MergeTopK(nq, s.segs.Addr(0), int64(segs*width), cands, out.Addr(0), width)
		}
		if err != nil {
			return err
		}
		prev = out.Addr(0)
		if out == s.keys[0] {
			out = s.keys[1]
		} else {
			out = s.keys[0]
		}
	}
	if prev == 0 { // an empty shard: no hits
		clear(s.hostKeys(nq * width))
		return nil
	}
	if err := s.kernels.SortKeys(nq, prev, width); err != nil {
		return err
	}
	res := s.keys[0]
	if res.Addr(0) != prev {
		res = s.keys[1]
	}
	h := s.hostKeys(nq * width)
	return res.Download(unsafe.Pointer(&h[0]), len(h)*8) // waits for the queued GEMMs and kernels
}

// hostKeys is s.host sized to n keys.
func (s *shard) hostKeys(n int) []uint64 {
	if cap(s.host) < n {
		s.host = make([]uint64, n)
	}
	s.host = s.host[:n]
	return s.host
}

// Stats are what /metrics shows of a GPU index.
type Stats struct {
	Devices       []string // "0: NVIDIA H100 80GB HBM3" per shard
	MemoryBytes   int64    // device memory the index holds (vectors and work space)
	Searches      uint64   // Search calls answered
	SearchSeconds float64  // their total time
	Healthy       bool     // false once a CUDA call failed (Err says which)
}

// Stats reports the index's devices, memory and search time.
func (x *Index) Stats() Stats {
	st := Stats{Searches: x.searches.Load(), SearchSeconds: time.Duration(x.nanos.Load()).Seconds(), Healthy: x.Err() == nil}
	for _, s := range x.shards {
		st.Devices = append(st.Devices, fmt.Sprintf("%d: %s", s.dev.Ordinal(), s.dev.Name()))
		for _, b := range s.bufs {
			st.MemoryBytes += int64(b.Size())
		}
	}
	return st
}

// Telemetry is the index's figures for /metrics (engine.TelemetryIndex).
func (x *Index) Telemetry() []prom.Metric {
	st := x.Stats()
	devices := prom.Metric{Name: "needle_gpu_device", Type: "gauge", Help: "GPUs the index is sharded over (one per shard)."}
	for _, d := range st.Devices {
		devices.Samples = append(devices.Samples, prom.Sample{Labels: fmt.Sprintf("device=%q", d), Value: 1})
	}
	healthy := 0.0
	if st.Healthy {
		healthy = 1
	}
	return []prom.Metric{devices,
		prom.Gauge("needle_gpu_memory_bytes", "Device memory the index holds (vectors and work space).", float64(st.MemoryBytes)),
		prom.Counter("needle_gpu_searches_total", "Index searches (batches) run on the GPU.", float64(st.Searches)),
		prom.Counter("needle_gpu_search_seconds_total", "Time spent in GPU index searches.", st.SearchSeconds),
		prom.Gauge("needle_gpu_healthy", "0 once a CUDA call failed (the server is then not ready).", healthy),
	}
}

// Err is the first CUDA failure of any shard's device, or nil while all are healthy.
func (x *Index) Err() error {
	for _, s := range x.shards {
		if err := s.dev.Err(); err != nil {
			return fmt.Errorf("GPU %d (%s): %w", s.dev.Ordinal(), s.dev.Name(), err)
		}
	}
	return nil
}

// Close frees the device memory and releases the devices.
func (x *Index) Close() {
	for _, s := range x.shards {
		s.close()
	}
	x.shards = nil
}

// Peaks measures the first shard's GPU (flatscangpu.Kernels.MeasurePeaks).
func (x *Index) Peaks() (flatscangpu.Peaks, error) {
	s := x.shards[0]
	return s.kernels.MeasurePeaks(s.dev, s.blas)
}

func (s *shard) close() {
	for _, b := range s.bufs {
		b.Free()
	}
	if s.kernels != nil {
		s.kernels.Unload()
	}
	if s.blas != nil {
		s.blas.Destroy()
	}
	s.dev.Close()
}
