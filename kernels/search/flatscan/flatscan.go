// Package flatscan is exact k-nearest-neighbor search over the rows of a flat index, streamed
// in stripes so that the rows can be a memory mapping larger than RAM: each stripe's scores
// come from dotmm tiles (kernels/linalg/dotmm, no BLAS) over 1024-row blocks on all threads,
// then each query's heap takes them in row order, with FAISS's IndexFlat heap and
// tie-breaking (1.7.3 and 1.12.0 alike). A query's scores are the same bits whatever other
// queries share its search (flatscan.h says how, and what that costs against FAISS's sgemm
// scores). A scalar
// implementation is the test oracle. Rescore
// applies the same scores and heaps to candidate rows picked by label (the exact re-scoring
// of index/compact).
package flatscan

/*
#cgo CFLAGS: -O3 -fopenmp -Wno-psabi
#cgo LDFLAGS: -fopenmp
#include "flatscan.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"needle/platform/cpu"
)

// Metric is how rows compare to queries; the values are FAISS's MetricType.
type Metric int

const (
	IP Metric = C.FLATSCAN_IP // inner product, larger is closer
	L2 Metric = C.FLATSCAN_L2 // squared Euclidean distance, smaller is closer
)

// Block is the row granularity of a scan: every stripe but the last is a multiple of it.
const Block = C.FLATSCAN_BLOCK

// Search is one batch of queries scanned over all rows: Start, Scan each stripe of rows in
// order (or Rescore a set of candidate rows per query), Finish. It owns its scratch memory
// (about queries x stripe rows floats), reused from one search to the next; not safe for
// concurrent use.
type Search struct {
	Level   cpu.Level // the kernels' SIMD level; cpu.Ref runs the scalar oracle on one thread
	Metric  Metric
	Dim     int
	Threads int // threads for the scores and the heaps (<= 0: 1)

	x, norms, dist []float32
	labels         []int64
	nq, k          int
	next           int64 // the row the next stripe must start at
	scratch        []float32
}

// Start begins a search of the queries (nq x Dim floats) for their k best rows; dist and
// labels (nq x k each, caller-owned) hold the running results and, after Finish, the result.
func (s *Search) Start(queries []float32, k int, dist []float32, labels []int64) error {
	if s.Dim <= 0 || len(queries)%s.Dim != 0 {
		return fmt.Errorf("flatscan: %d query floats for dimension %d", len(queries), s.Dim)
	}
	if s.Metric != IP && s.Metric != L2 {
		return fmt.Errorf("flatscan: unknown metric %d", s.Metric)
	}
	nq := len(queries) / s.Dim
	if k <= 0 || len(dist) != nq*k || len(labels) != nq*k {
		return fmt.Errorf("flatscan: k %d with %d distances and %d labels for %d queries", k, len(dist), len(labels), nq)
	}
	s.x, s.dist, s.labels, s.nq, s.k, s.next = queries, dist, labels, nq, k, 0
	if nq == 0 {
		return nil
	}
	C.flatscan_start(C.int(s.Metric), C.int64_t(nq), C.int64_t(k), (*C.float)(&dist[0]), (*C.int64_t)(&labels[0]))
	if s.Metric == L2 {
		s.norms = grow(s.norms, nq)
		C.flatscan_norms((*C.float)(&queries[0]), C.int64_t(nq), C.int64_t(s.Dim), (*C.float)(&s.norms[0]))
	}
	return nil
}

// Scan folds the rows starting at row row0 into the results: rows holds whole rows of Dim
// little-endian float32s at any alignment (a slice of a mapped index file). Stripes must
// come in order, without gaps, each but the last a multiple of Block rows. The rows are only
// read during the call.
func (s *Search) Scan(rows []byte, row0 int64) error {
	rowBytes := 4 * s.Dim
	if len(rows)%rowBytes != 0 {
		return fmt.Errorf("flatscan: a stripe of %d bytes is not whole rows of %d bytes", len(rows), rowBytes)
	}
	if row0 != s.next || row0%Block != 0 {
		return fmt.Errorf("flatscan: stripe starts at row %d, want row %d (a multiple of %d)", row0, s.next, Block)
	}
	n := len(rows) / rowBytes
	s.next += int64(n)
	if n == 0 || s.nq == 0 {
		return nil
	}
	if n > 1<<30 || s.Dim > 1<<20 {
		return fmt.Errorf("flatscan: a stripe of %d rows of dimension %d is too large for one scan", n, s.Dim)
	}
	s.scratch = grow(s.scratch, s.nq*n+n)
	var norms *C.float
	if s.Metric == L2 {
		norms = (*C.float)(&s.norms[0])
	}
	C.flatscan_scan(C.int32_t(s.Level), C.int(s.Metric), (*C.float)(&s.x[0]), norms, C.int64_t(s.nq),
		unsafe.Pointer(&rows[0]), C.int64_t(row0), C.int64_t(n), C.int64_t(s.Dim), C.int64_t(s.k),
		(*C.float)(&s.dist[0]), (*C.int64_t)(&s.labels[0]), (*C.float)(&s.scratch[0]), C.int(max(s.Threads, 1)))
	return nil
}

// Rescore folds candidate rows given by label into the results instead of stripes of
// consecutive rows (exact re-scoring of an approximate index's candidates): rows holds r
// gathered rows of Dim floats per query (nq x r x Dim), cand their labels (nq x r; -1: none).
// Each query's heap takes its candidates in the order given; sorted by label, the results are
// those of a Scan over just those rows. The rows are only read during the call.
func (s *Search) Rescore(rows []float32, cand []int64, r int) error {
	if r <= 0 || len(cand) != s.nq*r || len(rows) != len(cand)*s.Dim {
		return fmt.Errorf("flatscan: rescore of %d candidates per query: %d labels and %d floats for %d queries of dimension %d",
			r, len(cand), len(rows), s.nq, s.Dim)
	}
	if s.nq == 0 {
		return nil
	}
	s.scratch = grow(s.scratch, 2*s.nq*r)
	var norms *C.float
	if s.Metric == L2 {
		norms = (*C.float)(&s.norms[0])
	}
	C.flatscan_rescore(C.int32_t(s.Level), C.int(s.Metric), (*C.float)(&s.x[0]), norms, C.int64_t(s.nq),
		(*C.float)(&rows[0]), (*C.int64_t)(&cand[0]), C.int64_t(r), C.int64_t(s.Dim), C.int64_t(s.k),
		(*C.float)(&s.dist[0]), (*C.int64_t)(&s.labels[0]), (*C.float)(&s.scratch[0]), C.int(max(s.Threads, 1)))
	return nil
}

// Finish sorts the results best first; rows not found are label -1.
func (s *Search) Finish() {
	if s.nq > 0 {
		C.flatscan_finish(C.int(s.Metric), C.int64_t(s.nq), C.int64_t(s.k), (*C.float)(&s.dist[0]), (*C.int64_t)(&s.labels[0]))
	}
	s.x, s.dist, s.labels = nil, nil, nil
}

// StripeRows is how many rows a stripe should have for nq queries of dimension dim: its
// scores take at most 16 MB and its multiply-adds at most 2^27 (a few ms on two cores: a
// search stops between stripes, index/flat), within [Block, 64 Blocks] rows.
func StripeRows(nq, dim int) int {
	const scoreBytes, work = 16 << 20, 1 << 27
	nq, dim = max(nq, 1), max(dim, 1)
	rows := min(scoreBytes/4/nq, work/nq/dim) / Block * Block
	return min(max(rows, Block), 64*Block)
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}
