// Package engine answers retrieval queries for `needle serve`. A request flows top-down:
// Retrieve hands its queries to the Batcher, which coalesces the queries of concurrent
// requests into one Encoder batch (query text -> vectors) and one Index search (vectors ->
// row numbers and scores); Retrieve then reads each hit's row from the DocStore (row number
// -> raw corpus line) and returns the rows with their scores. Access looks pages up by URL.
//
// Open (open.go) is the one place where a served engine is assembled from its parts: it
// resolves a `needle build` folder's manifest, picks the index backend, loads the index,
// corpus, pages and encoder (engine/bert, faissgo, engine/docstore) and checks that they
// agree. The Retriever itself works against the interfaces below, so engine's tests and the
// server's run with the in-memory fakes of engine/enginetest.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"needle/engine/docstore"
)

// Encoder turns texts into L2-normalized vectors. Implementations must be safe for
// concurrent callers. Encode returns len(texts)*Dim() floats in input order; prefix is
// prepended to every text (e5's "query: ").
type Encoder interface {
	Dim() int
	Encode(texts []string, prefix string) ([]float32, error)
}

// Index is a vector index searched by inner product (or L2). Search reads n = len(x)/Dim()
// query vectors and writes n*k scores and row labels into the caller's buffers, best first;
// a label of -1 means no hit. Search must be safe for concurrent callers.
type Index interface {
	Dim() int
	Ntotal() int64
	Search(x []float32, k int, dist []float32, labels []int64) error
}

// DocStore returns corpus line i (0-based; line i is row i of the index) as one JSON
// object. The returned bytes are a read-only view valid until the store is closed. A line
// that is not a usable row gives a *docstore.BadRowError: Retrieve leaves that hit out.
type DocStore interface {
	Len() int64
	Row(i int64) ([]byte, error)
}

// PageStore finds a web page row (a JSON object) by URL, after the anchors' URL
// normalization. The returned bytes are a read-only view valid until the store is closed.
type PageStore interface {
	Lookup(url string) ([]byte, bool)
}

// Hit is one retrieved corpus row: the raw JSON object of its line (a read-only view, valid
// until the Retriever is closed) and its score.
type Hit struct {
	Row   []byte
	Score float32
}

// Retriever is the loaded, ready-to-serve engine of `needle serve`. Safe for concurrent
// use; Close only after every caller is done.
type Retriever struct {
	batcher *Batcher
	index   Index
	docs    DocStore
	pages   PageStore // nil without a pages file
	ntotal  int64
	badRows atomic.Uint64
	results sync.Pool // *searchResult, owned by one Retrieve call at a time
	closers []func()  // close the parts Open opened, after the Batcher
}

// searchResult holds the scores and row labels of one Retrieve call.
type searchResult struct {
	dist   []float32
	labels []int64
}

// NewRetriever checks that the index, encoder and corpus agree (dimension, row count) and
// starts a Batcher over them; pages may be nil. Close stops the Batcher.
func NewRetriever(enc Encoder, idx Index, docs DocStore, pages PageStore, prefix string, opt BatcherOptions) (*Retriever, error) {
	if enc.Dim() != idx.Dim() {
		return nil, fmt.Errorf("encoder dimension %d does not match index dimension %d", enc.Dim(), idx.Dim())
	}
	if docs.Len() != idx.Ntotal() {
		return nil, fmt.Errorf("corpus has %d rows but the index has %d vectors (row i of the index must be line i of the corpus)", docs.Len(), idx.Ntotal())
	}
	return &Retriever{
		batcher: NewBatcher(enc, idx, prefix, opt),
		index:   idx,
		docs:    docs,
		pages:   pages,
		ntotal:  idx.Ntotal(),
	}, nil
}

// Ntotal is the number of index rows; a useful k is at most this.
func (r *Retriever) Ntotal() int64 { return r.ntotal }

// Queued is the number of queries admitted and not yet answered (the queue depth).
func (r *Retriever) Queued() int64 { return r.batcher.Queued() }

// BadRowsSkipped counts the hits Retrieve left out because their corpus line is bad.
func (r *Retriever) BadRowsSkipped() uint64 { return r.badRows.Load() }

// HasPages reports whether a pages file was given (Access finds nothing without one).
func (r *Retriever) HasPages() bool { return r.pages != nil }

// Retrieve returns the k best hits of each query, best first. Hits without a row (the index
// found fewer than k) and hits whose corpus line is bad (not a JSON object with a string
// contents; `needle build` indexed them as empty text) are left out rather than failing every
// query of the request. It returns ErrBusy when the queue is full; ctx ending before a
// query's batch is encoded fails the call with ctx's error.
func (r *Retriever) Retrieve(ctx context.Context, queries []string, k int) ([][]Hit, error) {
	n := len(queries)
	out := make([][]Hit, n)
	if n == 0 || k <= 0 {
		return out, nil
	}
	res := r.getResult(n * k)
	defer r.results.Put(res)
	if err := r.batcher.Search(ctx, queries, k, res.dist, res.labels); err != nil {
		if errors.Is(err, ErrBusy) {
			return nil, err
		}
		if lost := r.IndexErr(); lost != nil {
			return nil, lost
		}
		return nil, fmt.Errorf("retrieval failed: %w", err)
	}
	hits := make([]Hit, 0, n*k)
	for q := range n {
		first := len(hits)
		for j := q * k; j < (q+1)*k; j++ {
			label := res.labels[j]
			if label < 0 {
				continue
			}
			row, err := r.docs.Row(label)
			if err != nil {
				if isBadRow(err) {
					r.badRows.Add(1)
					continue
				}
				return nil, fmt.Errorf("reading the corpus: corpus row %d: %w", label, err)
			}
			hits = append(hits, Hit{Row: row, Score: res.dist[j]})
		}
		out[q] = hits[first:len(hits):len(hits)]
	}
	return out, nil
}

// isBadRow tells a bad corpus line (skipped) from a failure to read the corpus. It is a
// function of its own so the errors.As target escapes to the heap only on this rare path.
func isBadRow(err error) bool {
	var bad *docstore.BadRowError
	return errors.As(err, &bad)
}

func (r *Retriever) getResult(n int) *searchResult {
	res, _ := r.results.Get().(*searchResult)
	if res == nil {
		res = &searchResult{}
	}
	if cap(res.dist) < n {
		res.dist, res.labels = make([]float32, n), make([]int64, n)
	}
	res.dist, res.labels = res.dist[:n], res.labels[:n]
	return res
}

// ErrIndexLost is wrapped by the errors of an index whose device failed (a GPU lost while
// serving): the server answers 503 and is no longer ready; a restart is needed.
var ErrIndexLost = errors.New("the index's device failed")

// IndexErr is nil while the index can search; for an index on a device that failed (one
// with an Err method, the GPU index), an error wrapping ErrIndexLost that says why.
func (r *Retriever) IndexErr() error {
	if h, ok := r.index.(interface{ Err() error }); ok {
		if err := h.Err(); err != nil {
			return fmt.Errorf("%w: %v", ErrIndexLost, err)
		}
	}
	return nil
}

// WriteIndexMetrics writes the index's own Prometheus metrics, for an index that has them
// (the GPU index: devices, memory, search time); nothing for a CPU index.
func (r *Retriever) WriteIndexMetrics(w io.Writer) {
	if m, ok := r.index.(interface{ WriteMetrics(io.Writer) }); ok {
		m.WriteMetrics(w)
	}
}

// Access returns the page row of each URL, nil for a URL that is not in the pages file
// (every URL without one, see HasPages). The rows are views into the pages file's mapping;
// a fault while looking them up (the file truncated under it) is an error wrapping ErrChanged.
func (r *Retriever) Access(urls []string) ([][]byte, error) {
	rows := make([][]byte, len(urls))
	if r.pages == nil {
		return rows, nil
	}
	err := CatchFault(func() {
		for i, u := range urls {
			if row, ok := r.pages.Lookup(u); ok {
				rows[i] = row
			}
		}
	})
	return rows, err
}

// ErrChanged is wrapped by the errors of reads that faulted because a served file (corpus
// or pages) was truncated or rewritten under its mapping.
var ErrChanged = docstore.ErrChanged

// CatchFault runs read, which touches a served file's mapping (rows Retrieve or Access
// returned), and turns a fault into an error wrapping ErrChanged instead of a crash.
func CatchFault(read func()) error { return docstore.CatchFault(read) }

// Close stops the Batcher after its queued work, then closes what Open opened. No call may
// start after Close is called (the server stops accepting requests first).
func (r *Retriever) Close() {
	r.batcher.Close()
	closeAll(r.closers)
}
