// Package faissgo is the only package of needle that touches FAISS (FAISS 1.12.0 through its
// C API, linked statically; tools/faiss.sh builds it) and owns every FAISS file format needle reads or writes. It
// creates indexes by factory string, trains, adds and searches in batches (one cgo call per
// batch, into caller-owned buffers), reads (optionally mmapped) and writes index files
// atomically, checks index files before FAISS reads them (format.go) and streams flat index
// files larger than RAM itself (writeflat.go).
//
// Errors from FAISS are copied inside the same C call that failed (shim.c), so they are never
// another goroutine's error. Index files are checked in Go before FAISS reads them
// (format.go): FAISS trusts the sizes in a file and can be driven into huge allocations or
// out-of-bounds reads by a corrupt one.
//
// github.com/DataIntelligenceCrew/go-faiss is not used: each of its fallible calls reads the
// error in a second cgo call (racy), its Search allocates the result slices, and its handles
// cannot be shared with a shim (the C pointer is unexported).
package faissgo

/*
#cgo CFLAGS: -O2 -fopenmp
#cgo CXXFLAGS: -O2 -std=c++17
#include <stdlib.h>
#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/utils/distances_c.h>
#include <faiss/c_api/utils/utils_c.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"unsafe"

	_ "needle/platform/blascore" // FAISS searches through OpenBLAS: this ISA's kernels
)

// errLen is the size of the buffer FAISS error messages are copied into.
const errLen = 1024

// searchErrBufs holds error buffers for Search: a buffer passed to C escapes to the heap,
// and Search is the hot path that must not allocate.
var searchErrBufs = sync.Pool{New: func() any { return new([errLen]C.char) }}

var initOnce sync.Once

// Init configures FAISS for the process: BLAS for every batch size (FAISS's default of 20
// makes batches of fewer queries up to 13x slower) and threads OpenMP threads per FAISS call
// (threads <= 0 keeps OpenMP's default, the number of cores). Only the first call has effect;
// New and Read call Init(0) if it was not called before.
func Init(threads int) {
	initOnce.Do(func() { C.needle_faiss_init(C.int(threads)) })
}

// Version is the release of the FAISS library linked in, e.g. "1.12.0" (FAISS's own answer).
func Version() string { return C.GoString(C.faiss_get_version()) }

// CompileOptions is how the linked FAISS was compiled, in FAISS's words: "OPTIMIZE GENERIC "
// for its baseline x86-64 build (its own loops without AVX2; the BLAS it calls picks its
// kernels at run time), "OPTIMIZE AVX2 " or "OPTIMIZE AVX512 " for the others.
func CompileOptions() string {
	var buf [64]C.char
	C.needle_faiss_compile_options(&buf[0], C.size_t(len(buf)))
	return strings.TrimSpace(C.GoString(&buf[0]))
}

// setBLASThreshold changes the batch size from which FAISS uses BLAS (FAISS default 20, Init
// sets 1); the benchmark compares the two in one run.
func setBLASThreshold(n int) { C.faiss_set_distance_compute_blas_threshold(C.int(n)) }

// Metric is how an index compares vectors. Values are FAISS's MetricType.
type Metric int

const (
	IP Metric = C.METRIC_INNER_PRODUCT // inner product, larger is closer
	L2 Metric = C.METRIC_L2            // squared Euclidean distance, smaller is closer
)

func (m Metric) String() string {
	switch m {
	case IP:
		return "IP"
	case L2:
		return "L2"
	}
	return fmt.Sprintf("metric(%d)", int(m))
}

// ParseMetric accepts "IP" (also "inner_product") and "L2", in any case.
func ParseMetric(s string) (Metric, error) {
	switch strings.ToLower(s) {
	case "ip", "inner_product":
		return IP, nil
	case "l2":
		return L2, nil
	}
	return 0, fmt.Errorf("unknown metric %q (want IP or L2)", s)
}

// Index is one FAISS index. All methods are safe for concurrent use: Search calls run in
// parallel; Train, Add, SetSearchParam and Close wait for running searches.
type Index struct {
	mu   sync.RWMutex
	ptr  *C.FaissIndex // nil after Close
	dim  int
	name string // file path or factory string, for error messages
	// readOnly is set for indexes read with mmap. FAISS throws when adding to mmapped
	// inverted lists from inside an OpenMP region, where the exception cannot be caught
	// and terminates the process (measured), so Train and Add refuse before calling it.
	readOnly bool
}

// errClosed is returned by methods called after Close.
var errClosed = errors.New("index is closed")

// faissError turns a failed shim call's status and message into an error.
func faissError(status C.int, buf []C.char) error {
	msg := C.GoString(&buf[0])
	if msg == "" {
		msg = fmt.Sprintf("FAISS status %d", int(status))
	}
	return errors.New(msg)
}

// New creates an index with FAISS's index_factory: "Flat", "IVF4096,Flat", "HNSW32", "SQ8",
// "IVF1024,PQ16", ... for vectors of dim floats.
func New(dim int, factory string, m Metric) (*Index, error) {
	Init(0)
	if dim <= 0 {
		return nil, fmt.Errorf("faissgo: new %q: dimension %d must be positive", factory, dim)
	}
	if m != IP && m != L2 {
		return nil, fmt.Errorf("faissgo: new %q: unsupported metric %v", factory, m)
	}
	cdesc := C.CString(factory)
	defer C.free(unsafe.Pointer(cdesc))
	var ptr *C.FaissIndex
	var buf [errLen]C.char
	if st := C.needle_index_factory(&ptr, C.int(dim), cdesc, C.int(m), &buf[0], errLen); st != 0 {
		return nil, fmt.Errorf("faissgo: new index %q (dim %d, %v): %w", factory, dim, m, faissError(st, buf[:]))
	}
	return &Index{ptr: ptr, dim: dim, name: factory}, nil
}

// Dim is the number of floats per vector.
func (x *Index) Dim() int { return x.dim }

// Ntotal is the number of vectors in the index (0 after Close).
func (x *Index) Ntotal() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.ptr == nil {
		return 0
	}
	return int64(C.faiss_Index_ntotal(x.ptr))
}

// Metric is the index's metric.
func (x *Index) Metric() Metric {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.ptr == nil {
		return -1
	}
	return Metric(C.faiss_Index_metric_type(x.ptr))
}

// IsTrained reports whether the index can take Add (false for an untrained IVF or PQ index).
func (x *Index) IsTrained() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.ptr != nil && C.faiss_Index_is_trained(x.ptr) != 0
}

// TypeName is the FAISS class of the index, e.g. "IndexFlatIP", "IndexHNSWFlat", "IndexIVFPQ".
func (x *Index) TypeName() string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.ptr == nil {
		return ""
	}
	var buf [128]C.char
	C.needle_index_type_name(x.ptr, &buf[0], C.size_t(len(buf)))
	return C.GoString(&buf[0])
}

// maxValue bounds the values of vectors given to FAISS. FAISS has no use for NaN or infinity,
// and an IVF index aborts the process when no centroid is at a finite distance from a vector:
// adding one asserts (measured with a NaN vector), and searching one with nprobe 1 reads an
// uninitialized list number (measured with values of 3e38, whose squared norm overflows).
// Within ±1e9, the squares of 65,536 values (and, behind a transform of entries within
// ±maxTransformValue, of its outputs) stay finite; embeddings are near unit length.
const maxValue = 1e9

// rows checks that v holds whole vectors of values within ±maxValue and returns how many.
func (x *Index) rows(op string, v []float32) (int, error) {
	if len(v)%x.dim != 0 {
		return 0, fmt.Errorf("faissgo: %s on %s: dimension mismatch: %d floats is not a multiple of the index dimension %d",
			op, x.name, len(v), x.dim)
	}
	for i, f := range v {
		if !(math.Abs(float64(f)) <= maxValue) {
			return 0, fmt.Errorf("faissgo: %s on %s: vector %d has %v at position %d (want finite values within ±%g)", op, x.name, i/x.dim, f, i%x.dim, float64(maxValue))
		}
	}
	return len(v) / x.dim, nil
}

// Train trains the index (IVF, PQ, SQ) on len(v)/Dim() vectors.
func (x *Index) Train(v []float32) error {
	return x.update("train", v, func(n C.int64_t, buf *C.char) C.int {
		return C.needle_train(x.ptr, n, (*C.float)(&v[0]), buf, errLen)
	})
}

// Add appends len(v)/Dim() vectors; their labels continue from Ntotal().
func (x *Index) Add(v []float32) error {
	return x.update("add", v, func(n C.int64_t, buf *C.char) C.int {
		return C.needle_add(x.ptr, n, (*C.float)(&v[0]), buf, errLen)
	})
}

// update runs a mutating shim call on v under the write lock.
func (x *Index) update(op string, v []float32, call func(n C.int64_t, buf *C.char) C.int) error {
	n, err := x.rows(op, v)
	if err != nil || n == 0 {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ptr == nil {
		return fmt.Errorf("faissgo: %s on %s: %w", op, x.name, errClosed)
	}
	if x.readOnly {
		return fmt.Errorf("faissgo: %s on %s: the index was read with mmap and is read-only", op, x.name)
	}
	var buf [errLen]C.char
	if st := call(C.int64_t(n), &buf[0]); st != 0 {
		return fmt.Errorf("faissgo: %s %d vectors on %s: %w", op, n, x.name, faissError(st, buf[:]))
	}
	return nil
}

// Search finds the k nearest vectors of each of the n = len(q)/Dim() queries in one FAISS
// call. The caller owns dist and labels, each of at least n*k elements; row i of the result
// is dist[i*k:(i+1)*k], best first. Missing results (k > Ntotal) have label -1.
func (x *Index) Search(q []float32, k int, dist []float32, labels []int64) error {
	n, err := x.rows("search", q)
	if err != nil {
		return err
	}
	if k <= 0 {
		return fmt.Errorf("faissgo: search on %s: k=%d must be positive", x.name, k)
	}
	if len(dist) < n*k || len(labels) < n*k {
		return fmt.Errorf("faissgo: search on %s: result buffers hold %d distances and %d labels, need %d (n=%d, k=%d)",
			x.name, len(dist), len(labels), n*k, n, k)
	}
	if n == 0 {
		return nil
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.ptr == nil {
		return fmt.Errorf("faissgo: search on %s: %w", x.name, errClosed)
	}
	buf := searchErrBufs.Get().(*[errLen]C.char)
	defer searchErrBufs.Put(buf)
	st := C.needle_search(x.ptr, C.int64_t(n), (*C.float)(&q[0]), C.int64_t(k),
		(*C.float)(&dist[0]), (*C.int64_t)(unsafe.Pointer(&labels[0])), &buf[0], errLen)
	if st != 0 {
		return fmt.Errorf("faissgo: search %d queries on %s: %w", n, x.name, faissError(st, buf[:]))
	}
	return nil
}

// SetSearchParam sets a search-time parameter through FAISS's ParameterSpace: "nprobe" (IVF:
// lists visited per query) or "efSearch" (HNSW: candidate list size), an integer in
// 1..2^20. Other ParameterSpace names are passed through unchecked.
func (x *Index) SetSearchParam(name string, v float64) error {
	// FAISS converts to int without checks; a negative or overflowing efSearch makes HNSW
	// search allocate inside an OpenMP region, where a failure terminates the process.
	if (name == "nprobe" || name == "efSearch") && (v != math.Trunc(v) || v < 1 || v > maxEfSearch) {
		return fmt.Errorf("faissgo: set %s=%g on %s: want an integer in 1..%d", name, v, x.name, maxEfSearch)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ptr == nil {
		return fmt.Errorf("faissgo: set %s on %s: %w", name, x.name, errClosed)
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var buf [errLen]C.char
	if st := C.needle_set_param(x.ptr, cname, C.double(v), &buf[0], errLen); st != 0 {
		return fmt.Errorf("faissgo: set %s=%g on %s: %w", name, v, x.name, faissError(st, buf[:]))
	}
	return nil
}

// Close frees the index. It is safe to call more than once.
func (x *Index) Close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ptr != nil {
		C.faiss_Index_free(x.ptr)
		x.ptr = nil
	}
}
