// Package engine answers retrieval queries for `needle serve`. A request flows top-down:
// Retrieve hands its queries to the Batcher, which coalesces the queries of concurrent
// requests into one Encoder batch (query text -> vectors) and one Index search (vectors ->
// row numbers and scores); Retrieve then reads each hit's row from the DocStore (row number
// -> raw corpus line) and returns the rows with their scores. Access looks pages up by URL.
//
// Open (open.go) is the one place where a served engine is assembled from its parts: it
// resolves a `needle build` folder's manifest, picks the index backend, loads the index,
// corpus, pages and encoder (encoder/bert, faissgo, docstore) and checks that they
// agree. The Retriever itself works against the interfaces below, so engine's tests and the
// server's run with the in-memory fakes of testkit/enginetest.
package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"needle/docstore"
	"needle/encoder/rerank"
	"needle/internal/prom"
)

// Encoder turns texts into L2-normalized vectors. Implementations must be safe for
// concurrent callers. Encode returns len(texts)*Dim() floats in input order; prefix is
// prepended to every text (e5's "query: ").
type Encoder interface {
	Dim() int
	Encode(texts []string, prefix string) ([]float32, error)
}

// ContextEncoder is an Encoder that can give up a batch part way through (encoder/bert: between
// layers) once ctx ends, returning ctx's error. The Batcher uses it, where the Encoder has it,
// to stop a batch whose every client has gone away. Its units of work (encoder/bert: each op of
// a layer) should begin with gate.Wait(ctx) (internal/gate): for a request larger than one batch
// the Batcher puts a gate.Unit in ctx, and Wait pauses the batch there while smaller requests'
// work goes first (or the big request's search takes its turn). An Encoder without it pauses
// only between batches, and then runs beside the big request's search.
type ContextEncoder interface {
	Encoder
	EncodeContext(ctx context.Context, texts []string, prefix string) ([]float32, error)
}

// ContextIndex is an Index whose search can stop part way once ctx ends, returning ctx's
// error (index/flat: between stripes of rows, a pass over wiki-18's flat file takes
// minutes; index/compact: between units of 16 queries). The Batcher uses it, where the Index has it, to stop a search whose every client
// has gone away. As for ContextEncoder, its units (index/flat: each stripe) should begin
// with gate.Wait(ctx), and a search waiting there must hold nothing another search needs: a
// single query's search runs meanwhile (index/flat's searches run side by side).
type ContextIndex interface {
	Index
	SearchContext(ctx context.Context, x []float32, k int, dist []float32, labels []int64) error
}

// The Index's other optional abilities, asked for by the Retriever alone (the server never
// learns which index runs): Checker (below), and

// DeviceIndex is an Index on a device that can fail (index/flatgpu): Err is nil while it can
// search; once not, the server answers 503 and is no longer ready (a restart is needed).
type DeviceIndex interface {
	Index
	Err() error
}

// TelemetryIndex is an Index with figures of its own for /metrics (index/flatgpu: devices,
// memory, search time), written by the server's writer with its own.
type TelemetryIndex interface {
	Index
	Telemetry() []prom.Metric
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

// Searcher finds the k best rows of each query text, writing n*k scores and labels (-1: no
// hit) best first, as Index.Search does for vectors: the Batcher (Encoder + Index), a BM25
// index (index/bm25) or a fusion of two (Fusion). Safe for concurrent callers.
type Searcher interface {
	Search(ctx context.Context, queries []string, k int, dist []float32, labels []int64) error
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
	batcher  *Batcher // nil when no encoder is served (BM25 alone)
	searcher Searcher // the batcher, the BM25 index, or their fusion
	index    Index
	docs     DocStore
	pages    PageStore // nil without a pages file
	ntotal   int64
	badRows  atomic.Uint64
	results  sync.Pool // *searchResult, owned by one Retrieve call at a time
	closers  []func()  // close the parts Open opened, after the Batcher

	cache    *resultCache                // nil: no cache (see WithCache)
	reranker *rerank.CrossEncoder        // nil without Options.RerankModel
	backend  string                      // the index backend Open chose ("" for NewRetriever's caller's index)
	check    func(context.Context) error // the index's Check (remote backends), nil for none
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
	b, err := NewBatcher(enc, idx, prefix, opt)
	if err != nil {
		return nil, err
	}
	r := &Retriever{
		batcher:  b,
		searcher: b,
		index:    idx,
		docs:     docs,
		pages:    pages,
		ntotal:   idx.Ntotal(),
	}
	if c, ok := idx.(Checker); ok {
		r.check = c.Check
	}
	return r, nil
}

// Checker is an Index that lives in another process (index/milvusindex): Check says whether
// it can answer now, with an UnavailableError when not.
type Checker interface {
	Index
	Check(ctx context.Context) error
}

// UnavailableError is the error of an index backend in another process that did not answer
// (Milvus down, restarting, or its collection not loaded): a retry may succeed, and the
// server answers 503 + Retry-After. Backends define their own (milvusindex.ErrUnavailable);
// IsUnavailable finds one in an error chain.
type UnavailableError interface {
	error
	Unavailable() bool
}

// IsUnavailable reports whether err wraps an UnavailableError.
func IsUnavailable(err error) bool {
	var u UnavailableError
	return errors.As(err, &u) && u.Unavailable()
}

// ErrUnavailable is an UnavailableError for stand-ins of remote backends to wrap.
var ErrUnavailable error = unavailable("index unavailable")

type unavailable string

func (e unavailable) Error() string     { return string(e) }
func (e unavailable) Unavailable() bool { return true }

// Ready reports whether the index can answer now (nil for an index in this process).
func (r *Retriever) Ready(ctx context.Context) error {
	if r.check == nil {
		return nil
	}
	return r.check(ctx)
}

// WithCache gives r a result cache of at most maxBytes (0: none) and returns r; call it
// before the first Retrieve. A cached answer is the first answer's hits themselves (row views
// into the corpus mapping and scores), so it is byte for byte what Retrieve returned then.
func (r *Retriever) WithCache(maxBytes int64) *Retriever {
	r.cache = newResultCache(maxBytes)
	return r
}

// CacheStats returns the result cache's hits, misses, evictions, bytes and coalesced misses.
func (r *Retriever) CacheStats() CacheStats { return r.cache.stats() }

// Ntotal is the number of index rows; a useful k is at most this.
func (r *Retriever) Ntotal() int64 { return r.ntotal }

// IndexBackend is the index backend Open chose (BackendFAISS, BackendMapped), "" when the
// Retriever was built by NewRetriever over an index of the caller's.
func (r *Retriever) IndexBackend() string { return r.backend }

// Queued is the number of queries admitted and not yet answered (the queue depth).
func (r *Retriever) Queued() int64 {
	if r.batcher == nil {
		return 0
	}
	return r.batcher.Queued()
}

// BadRowsSkipped counts the hits Retrieve left out because their corpus line is bad.
func (r *Retriever) BadRowsSkipped() uint64 { return r.badRows.Load() }

// DroppedQueries counts the queries dropped unencoded because their request's context
// ended first (the server ends it when the client disconnects).
func (r *Retriever) DroppedQueries() int64 {
	if r.batcher == nil {
		return 0
	}
	return r.batcher.Dropped()
}

// BulkPauses counts the times work for a request of more than MaxBatch queries paused so that
// smaller requests went first (Batcher.BulkPauses).
func (r *Retriever) BulkPauses() int64 {
	if r.batcher == nil {
		return 0
	}
	return r.batcher.BulkPauses()
}

// ChargeOutside tells the lanes' fair shares (docs/fair-batching.md) that the caller spent d
// on a request of n queries outside Retrieve (parsing it, writing its answer): for an
// interactive request that time ran beside bulk work and is charged to the interactive lane
// (gate.ChargeInteractive); a bulk request's is not charged.
func (r *Retriever) ChargeOutside(n int, d time.Duration) {
	if r.inBulkLane(n) {
		return
	}
	if r.batcher != nil {
		r.batcher.gate.ChargeInteractive(d)
	} else if l, ok := r.searcher.(*laneSearcher); ok {
		l.gate.ChargeInteractive(d)
	}
}

// HasPages reports whether a pages file was given (Access finds nothing without one).
func (r *Retriever) HasPages() bool { return r.pages != nil }

// Retrieve returns the k best hits of each query, best first. Hits without a row (the index
// found fewer than k) and hits whose corpus line is bad (not a JSON object with a string
// contents; `needle build` indexed them as empty text) are left out rather than failing every
// query of the request. Repeats of a query within the request are searched once; with a
// cache (WithCache), queries it holds are not searched again, and queries another call is
// searching wait for its answer. The returned hit slices may be shared with the cache and
// other callers: read them, never write into them. It returns ErrBusy when the queue is
// full; ctx ending before a query's batch is encoded, or while the call waits for another
// call's search, fails the call with ctx's error.
func (r *Retriever) Retrieve(ctx context.Context, queries []string, k int) ([][]Hit, error) {
	n := len(queries)
	out := make([][]Hit, n)
	if n == 0 || k <= 0 {
		return out, nil
	}
	bulk := r.inBulkLane(n) // this call's searches run in the bulk lane
	// flights[q] answers query q unless the cache did; this call searches the led ones.
	flights := make([]*flight, n)
	var led []*flight
	var search []string
	var byText map[string]*flight // repeats within the request
	if n > 1 {
		byText = make(map[string]*flight, n)
	}
	for q, text := range queries {
		if f := byText[text]; f != nil {
			flights[q] = f
			continue
		}
		hits, f, lead := r.cache.lookup(cacheKey{text, k}, bulk)
		if f == nil {
			out[q] = hits
			continue
		}
		flights[q] = f
		if byText != nil {
			byText[text] = f
		}
		if lead {
			led, search = append(led, f), append(search, text)
		}
	}
	found, err := r.search(ctx, search, k)
	for i, f := range led {
		var hits []Hit
		if err == nil {
			hits = found[i]
		}
		r.cache.finish(f, hits, err)
	}
	if err != nil {
		return nil, err
	}
	for q, f := range flights {
		if f == nil {
			continue
		}
		if f.done != nil {
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, fmt.Errorf("retrieval failed: %w", ctx.Err())
			}
		}
		out[q] = f.hits
		if f.err != nil {
			// Another call's search failed (its client went away, the queue was full):
			// ask again, as a call of its own.
			hits, err := r.Retrieve(ctx, queries[q:q+1], k)
			if err != nil {
				return nil, err
			}
			out[q] = hits[0]
		}
	}
	return out, nil
}

// search encodes and searches queries and returns the hits of each.
// inBulkLane reports whether a call of n queries runs in the bulk lane: the Batcher's, or for
// BM25 alone its laneSearcher's (the result cache lifts interactive waiters off either).
func (r *Retriever) inBulkLane(n int) bool {
	if r.batcher != nil {
		return r.batcher.inBulkLane(n)
	}
	l, ok := r.searcher.(*laneSearcher)
	return ok && l.inBulkLane(n)
}

func (r *Retriever) search(ctx context.Context, queries []string, k int) ([][]Hit, error) {
	n := len(queries)
	if n == 0 {
		return nil, nil
	}
	out := make([][]Hit, n)
	res := r.getResult(n * k)
	defer r.results.Put(res)
	if err := r.searcher.Search(ctx, queries, k, res.dist, res.labels); err != nil {
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

// IndexErr is nil while the index can search; for a DeviceIndex whose device failed (the GPU
// index), an error wrapping ErrIndexLost that says why.
func (r *Retriever) IndexErr() error {
	if h, ok := r.index.(DeviceIndex); ok {
		if err := h.Err(); err != nil {
			return fmt.Errorf("%w: %v", ErrIndexLost, err)
		}
	}
	return nil
}

// IndexTelemetry are the index's own figures for /metrics, for a TelemetryIndex (the GPU index:
// devices, memory, search time); none for a CPU index.
func (r *Retriever) IndexTelemetry() []prom.Metric {
	if m, ok := r.index.(TelemetryIndex); ok {
		return m.Telemetry()
	}
	return nil
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
	if r.batcher != nil {
		r.batcher.Close()
	}
	closeAll(r.closers)
}
