package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"needle/engine"
	"needle/internal/gate"
	"needle/testkit/enginetest"
)

// corpusTexts returns n distinct small documents.
func corpusTexts(n int) []string {
	texts := make([]string, n)
	for i := range texts {
		texts[i] = fmt.Sprintf("doc%d topic%d shared word%d", i, i%7, i%13)
	}
	return texts
}

// direct is the oracle: the fake index searched without the Batcher.
func direct(t *testing.T, enc engine.Encoder, idx engine.Index, queries []string, k int) ([]float32, []int64) {
	t.Helper()
	vecs, err := enc.Encode(queries, "query: ")
	if err != nil {
		t.Fatal(err)
	}
	dist, labels := make([]float32, len(queries)*k), make([]int64, len(queries)*k)
	if err := idx.Search(vecs, k, dist, labels); err != nil {
		t.Fatal(err)
	}
	return dist, labels
}

func TestBatcherMatchesDirectSearch(t *testing.T) {
	enc := &enginetest.HashEncoder{Dimension: 32}
	_, idx := enginetest.Corpus(enc, corpusTexts(200))
	for _, tc := range []struct {
		name     string
		maxBatch int
		n, k     int
	}{
		{"one query", 8, 1, 3},
		{"exact batch", 8, 8, 5},
		{"split odd", 8, 19, 4},
		{"big request", 16, 300, 2},
		{"k above ntotal", 8, 3, 250},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := enginetest.NewBatcher(t, enc, idx, "query: ", engine.BatcherOptions{MaxBatch: tc.maxBatch})
			defer b.Close()
			queries := corpusTexts(tc.n)
			for i := range queries {
				queries[i] = fmt.Sprintf("topic%d word%d", i%7, i%5)
			}
			dist, labels := make([]float32, tc.n*tc.k), make([]int64, tc.n*tc.k)
			if err := b.Search(context.Background(), queries, tc.k, dist, labels); err != nil {
				t.Fatal(err)
			}
			wantD, wantL := direct(t, enc, idx, queries, tc.k)
			for i := range wantL {
				if labels[i] != wantL[i] || dist[i] != wantD[i] {
					t.Fatalf("hit %d: got (%d, %v), want (%d, %v)", i, labels[i], dist[i], wantL[i], wantD[i])
				}
			}
		})
	}
}

// Concurrent requests with different k share batches; each must get its own answers.
func TestBatcherConcurrentCoalesces(t *testing.T) {
	enc := &enginetest.HashEncoder{Dimension: 32}
	_, idx := enginetest.Corpus(enc, corpusTexts(100))
	var sizes sync.Map
	b := enginetest.NewBatcher(t, enc, idx, "query: ", engine.BatcherOptions{MaxBatch: 32, MaxWait: 5 * time.Millisecond,
		OnBatch: func(n int) { sizes.Store(n, true) }})
	defer b.Close()
	before := enc.Batches.Load()
	const callers = 64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := 1 + c%5
			q := []string{fmt.Sprintf("topic%d word%d", c%7, c%13)}
			dist, labels := make([]float32, k), make([]int64, k)
			if err := b.Search(context.Background(), q, k, dist, labels); err != nil {
				errs <- err
				return
			}
			wantD, wantL := direct(t, enc, idx, q, k)
			for i := range wantL {
				if labels[i] != wantL[i] || dist[i] != wantD[i] {
					errs <- fmt.Errorf("caller %d hit %d: got %d, want %d", c, i, labels[i], wantL[i])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The oracle calls Encode once per caller; the batcher must have needed fewer batches.
	if batches := enc.Batches.Load() - before - callers; batches >= callers {
		t.Errorf("%d encoder batches for %d concurrent single-query requests: nothing was coalesced", batches, callers)
	}
	sizes.Range(func(n, _ any) bool {
		if n.(int) > 32 {
			t.Errorf("batch of %d queries exceeds MaxBatch 32", n)
		}
		return true
	})
	if q := b.Queued(); q != 0 {
		t.Errorf("queue depth %d after all requests answered", q)
	}
}

// gatedIndex records the query count of every search and holds the first one until
// release is closed, so that encoded batches pile up behind it.
type gatedIndex struct {
	engine.Index
	release chan struct{}
	mu      sync.Mutex
	sizes   []int
}

func (g *gatedIndex) Search(q []float32, k int, dist []float32, labels []int64) error {
	g.mu.Lock()
	g.sizes = append(g.sizes, len(q)/g.Dim())
	first := len(g.sizes) == 1
	g.mu.Unlock()
	if first {
		<-g.release
	}
	return g.Index.Search(q, k, dist, labels)
}

// With MaxSearchBatch above MaxBatch, the batches encoded during a search are searched
// together, each request still getting its own answers.
func TestBatcherCoalescesSearches(t *testing.T) {
	enc := &enginetest.HashEncoder{Dimension: 32}
	_, flat := enginetest.Corpus(enc, corpusTexts(100))
	idx := &gatedIndex{Index: flat, release: make(chan struct{})}
	b := enginetest.NewBatcher(t, enc, idx, "query: ", engine.BatcherOptions{MaxBatch: 16, MaxSearchBatch: 320})
	defer b.Close()
	queries := make([]string, 320)
	for i := range queries {
		queries[i] = fmt.Sprintf("topic%d word%d", i%7, i%13)
	}
	errs := make(chan error, 2)
	results := make([][]int64, 2)
	for r, k := range []int{3, 5} { // two requests with different k share searches
		go func() {
			dist, labels := make([]float32, len(queries)*k), make([]int64, len(queries)*k)
			results[r] = labels // read only after errs says Search returned
			errs <- b.Search(context.Background(), queries, k, dist, labels)
		}()
	}
	before, began := enc.Batches.Load(), time.Now()
	// Most of the 40 encoder batches are done (or, were they not let through, 5 s passed).
	for enc.Batches.Load()-before < 30 && time.Since(began) < 5*time.Second {
		time.Sleep(time.Millisecond)
	}
	close(idx.release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for r, k := range []int{3, 5} {
		_, want := direct(t, enc, flat, queries, k)
		for i := range want {
			if results[r][i] != want[i] {
				t.Fatalf("request %d hit %d: %d, want %d", r, i, results[r][i], want[i])
			}
		}
	}
	if len(idx.sizes) > 6 {
		t.Errorf("%d searches of %v queries for 40 encoder batches: the waiting batches were not searched together", len(idx.sizes), idx.sizes)
	}
	for _, n := range idx.sizes {
		if n > 320 {
			t.Errorf("a search of %d queries exceeds MaxSearchBatch 320", n)
		}
	}
}

func TestBatcherBusyWhenQueueFull(t *testing.T) {
	hash := &enginetest.HashEncoder{Dimension: 8}
	_, idx := enginetest.Corpus(hash, corpusTexts(10))
	enc := &enginetest.GatedEncoder{Encoder: hash, Started: make(chan struct{}, 10), Release: make(chan struct{})}
	b := enginetest.NewBatcher(t, enc, idx, "", engine.BatcherOptions{MaxBatch: 4, MaxQueued: 6})
	defer b.Close()
	search := func(n int) error {
		q := make([]string, n)
		return b.Search(context.Background(), q, 1, make([]float32, n), make([]int64, n))
	}
	first := make(chan error, 1)
	go func() { first <- search(5) }()
	<-enc.Started
	if err := search(2); !errors.Is(err, engine.ErrBusy) {
		t.Fatalf("7 queued queries with MaxQueued 6: got %v, want ErrBusy", err)
	}
	close(enc.Release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := search(6); err != nil {
		t.Fatalf("empty queue must admit a request: %v", err)
	}
}

func TestBatcherEncoderErrorReachesEveryCaller(t *testing.T) {
	enc := &enginetest.HashEncoder{Dimension: 8}
	_, idx := enginetest.Corpus(enc, corpusTexts(10))
	enc.Fail = errors.New("encoder broke")
	b := enginetest.NewBatcher(t, enc, idx, "", engine.BatcherOptions{MaxBatch: 2})
	defer b.Close()
	err := b.Search(context.Background(), []string{"a", "b", "c"}, 2, make([]float32, 6), make([]int64, 6))
	if err == nil || err.Error() != "encoder broke" {
		t.Fatalf("got %v, want the encoder's error", err)
	}
	if q := b.Queued(); q != 0 {
		t.Errorf("queue depth %d after failed requests", q)
	}
}

func TestBatcherCanceledContextSkipsWork(t *testing.T) {
	enc := &enginetest.HashEncoder{Dimension: 8}
	_, idx := enginetest.Corpus(enc, corpusTexts(10))
	b := enginetest.NewBatcher(t, enc, idx, "", engine.BatcherOptions{})
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := enc.Batches.Load()
	err := b.Search(ctx, []string{"a"}, 1, make([]float32, 1), make([]int64, 1))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if enc.Batches.Load() != before {
		t.Error("a canceled request was still encoded")
	}
}

// stoppableEncoder is a GatedEncoder that is also an engine.ContextEncoder: a held call gives
// up with ctx's error when ctx ends first.
type stoppableEncoder struct{ *enginetest.GatedEncoder }

func (e stoppableEncoder) EncodeContext(ctx context.Context, texts []string, prefix string) ([]float32, error) {
	e.Started <- struct{}{}
	select {
	case <-e.Release:
		return e.Encoder.Encode(texts, prefix)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A batch being encoded stops once every job in it has ended (their clients went away), and
// its queries count as dropped; while one job of the batch still waits, the batch goes on.
func TestBatcherStopsABatchNoOneWaitsFor(t *testing.T) {
	hash := &enginetest.HashEncoder{Dimension: 8}
	_, idx := enginetest.Corpus(hash, corpusTexts(10))
	start := func() (*engine.Batcher, stoppableEncoder) {
		enc := stoppableEncoder{&enginetest.GatedEncoder{Encoder: hash, Started: make(chan struct{}, 1), Release: make(chan struct{})}}
		// MaxWait gathers the jobs sent together into one batch.
		b := enginetest.NewBatcher(t, enc, idx, "", engine.BatcherOptions{MaxBatch: 4, MaxWait: 100 * time.Millisecond})
		t.Cleanup(b.Close)
		return b, enc
	}
	search := func(b *engine.Batcher, ctx context.Context, queries ...string) chan error {
		done := make(chan error, 1)
		go func() { done <- b.Search(ctx, queries, 1, make([]float32, len(queries)), make([]int64, len(queries))) }()
		return done
	}

	b, enc := start()
	gone, leave := context.WithCancel(context.Background())
	first := search(b, gone, "doc1", "doc2", "doc3")
	<-enc.Started
	leave()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the abandoned batch: %v, want context.Canceled", err)
	}
	if got := b.Dropped(); got != 3 {
		t.Errorf("Dropped %d after the stopped batch, want 3", got)
	}

	b, enc = start()
	gone, leave = context.WithCancel(context.Background())
	abandoned, kept := search(b, gone, "doc4"), search(b, context.Background(), "doc5")
	<-enc.Started
	leave()
	time.Sleep(10 * time.Millisecond) // room for a wrong stop of the batch to happen
	close(enc.Release)
	if err := <-kept; err != nil {
		t.Errorf("the job still waiting in a batch with an abandoned one: %v", err)
	}
	<-abandoned // its answer, computed anyway, is discarded by Search's caller
}

// An encoded batch whose every request ended while it waited for the index is not searched,
// and its queries count as dropped; the live request ahead of it is answered.
func TestBatcherSkipsSearchesNoOneWaitsFor(t *testing.T) {
	enc := &enginetest.HashEncoder{Dimension: 8}
	_, flat := enginetest.Corpus(enc, corpusTexts(10))
	idx := &gatedIndex{Index: flat, release: make(chan struct{})}
	b := enginetest.NewBatcher(t, enc, idx, "", engine.BatcherOptions{MaxBatch: 4})
	defer b.Close()
	search := func(ctx context.Context, n int) chan error {
		done := make(chan error, 1)
		go func() { done <- b.Search(ctx, corpusTexts(n), 1, make([]float32, n), make([]int64, n)) }()
		return done
	}
	base := enc.Batches.Load() // the corpus's
	live := search(context.Background(), 4)
	for enc.Batches.Load() < base+1 { // its search is held by the index
		time.Sleep(time.Millisecond)
	}
	gone, leave := context.WithCancel(context.Background())
	abandoned := search(gone, 4)      // a batch's worth: the same (interactive) lane as the live one
	for enc.Batches.Load() < base+2 { // its batch is encoded and waits for the index
		time.Sleep(time.Millisecond)
	}
	leave()
	close(idx.release)
	if err := <-live; err != nil {
		t.Fatal(err)
	}
	if err := <-abandoned; !errors.Is(err, context.Canceled) {
		t.Errorf("the abandoned request: %v, want context.Canceled", err)
	}
	if len(idx.sizes) != 1 || b.Dropped() != 4 {
		t.Errorf("searches of %v queries, %d dropped; want only the live request's search and its 4 dropped", idx.sizes, b.Dropped())
	}
}

// stoppableIndex is an engine.ContextIndex whose searches wait until release is closed, or
// give up with ctx's error when ctx ends first.
type stoppableIndex struct {
	engine.Index
	started, release chan struct{}
}

func (x stoppableIndex) SearchContext(ctx context.Context, q []float32, k int, dist []float32, labels []int64) error {
	x.started <- struct{}{}
	select {
	case <-x.release:
		return x.Index.Search(q, k, dist, labels)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A search in progress stops once every request in it has ended, and its queries count as
// dropped; the next request is searched as usual.
func TestBatcherStopsASearchNoOneWaitsFor(t *testing.T) {
	enc := &enginetest.HashEncoder{Dimension: 8}
	_, flat := enginetest.Corpus(enc, corpusTexts(10))
	idx := stoppableIndex{Index: flat, started: make(chan struct{}, 2), release: make(chan struct{})}
	b := enginetest.NewBatcher(t, enc, idx, "", engine.BatcherOptions{MaxBatch: 4})
	defer b.Close()
	gone, leave := context.WithCancel(context.Background())
	abandoned := make(chan error, 1)
	go func() { abandoned <- b.Search(gone, corpusTexts(3), 1, make([]float32, 3), make([]int64, 3)) }()
	<-idx.started
	leave()
	if err := <-abandoned; !errors.Is(err, context.Canceled) {
		t.Fatalf("the abandoned search: %v, want context.Canceled", err)
	}
	if got := b.Dropped(); got != 3 {
		t.Errorf("Dropped %d after the stopped search, want 3", got)
	}
	close(idx.release)
	if err := b.Search(context.Background(), corpusTexts(2), 1, make([]float32, 2), make([]int64, 2)); err != nil {
		t.Errorf("the next request: %v", err)
	}
}

func TestBatcherRejectsBadArguments(t *testing.T) {
	enc := &enginetest.HashEncoder{Dimension: 8}
	_, idx := enginetest.Corpus(enc, corpusTexts(10))
	b := enginetest.NewBatcher(t, enc, idx, "", engine.BatcherOptions{})
	defer b.Close()
	if err := b.Search(context.Background(), []string{"a"}, 0, nil, nil); err == nil {
		t.Error("k = 0 accepted")
	}
	if err := b.Search(context.Background(), []string{"a", "b"}, 2, make([]float32, 3), make([]int64, 4)); err == nil {
		t.Error("short result buffer accepted")
	}
	if err := b.Search(context.Background(), nil, 2, nil, nil); err != nil {
		t.Errorf("no queries: %v", err)
	}
}

// Identical texts in one encoder batch, within a request and across the requests coalesced
// into it, are encoded and searched once; every query still gets its own answer for its k.
func TestBatcherDedupesWithinABatch(t *testing.T) {
	hash := &enginetest.HashEncoder{Dimension: 16}
	_, idx := enginetest.Corpus(hash, corpusTexts(40))
	enc := &enginetest.GatedEncoder{Encoder: hash, Started: make(chan struct{}, 4), Release: make(chan struct{})}
	var batches []int
	b := enginetest.NewBatcher(t, enc, idx, "query: ", engine.BatcherOptions{MaxBatch: 8, OnBatch: func(n int) { batches = append(batches, n) }})
	defer b.Close()
	before := hash.Texts.Load()
	type request struct {
		queries []string
		k       int
		dist    []float32
		labels  []int64
	}
	reqs := []*request{{queries: []string{"doc1"}, k: 1}, // holds the encoder while the others queue
		{queries: []string{"topic3 word5", "doc9", "topic3 word5"}, k: 2}, {queries: []string{"doc9", "topic3 word5"}, k: 4}}
	errs := make(chan error, len(reqs))
	for i, r := range reqs {
		r.dist, r.labels = make([]float32, len(r.queries)*r.k), make([]int64, len(r.queries)*r.k)
		go func() { errs <- b.Search(context.Background(), r.queries, r.k, r.dist, r.labels) }()
		if i == 0 {
			<-enc.Started
		}
	}
	for b.Queued() != 6 {
		time.Sleep(time.Millisecond)
	}
	close(enc.Release)
	for range reqs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if encoded := hash.Texts.Load() - before; encoded != 3 || !slices.Equal(batches, []int{1, 2}) {
		t.Errorf("encoded %d texts in batches of %v; want 3 in batches of [1 2] (the repeats encoded once)", encoded, batches)
	}
	for _, r := range reqs {
		wantD, wantL := direct(t, hash, idx, r.queries, r.k)
		if !slices.Equal(r.labels, wantL) || !slices.Equal(r.dist, wantD) {
			t.Errorf("%q k %d: got %v %v, want %v %v", r.queries, r.k, r.labels, r.dist, wantL, wantD)
		}
	}
}

// recorder is an engine.ContextEncoder and engine.Index that records, in the order they
// happen, the start of each "layer" of an encoder batch (two per batch, each after a pause
// point, as encoder/bert's ops) and each search's query count. It holds the first layer of
// the batches, and the searches, that hold selects until release is closed, signalling each
// on held first.
type recorder struct {
	*enginetest.HashEncoder
	engine.Index
	mu      sync.Mutex
	events  []string
	hold    func(texts []string, queries int) bool
	held    chan struct{}
	release chan struct{}
}

func newRecorder(hold func(texts []string, queries int) bool) *recorder {
	enc := &enginetest.HashEncoder{Dimension: 16}
	_, idx := enginetest.Corpus(enc, corpusTexts(40))
	return &recorder{HashEncoder: enc, Index: idx, hold: hold, held: make(chan struct{}, 8), release: make(chan struct{})}
}

func (r *recorder) Dim() int { return r.HashEncoder.Dim() }

func (r *recorder) log(event string) {
	r.mu.Lock()
	r.events = append(r.events, event)
	r.mu.Unlock()
}

func (r *recorder) EncodeContext(ctx context.Context, texts []string, prefix string) ([]float32, error) {
	for layer := range 2 {
		if err := gate.Wait(ctx); err != nil {
			return nil, err
		}
		r.log(fmt.Sprintf("%s layer %d", texts[0], layer))
		if layer == 0 && r.hold(texts, 0) {
			r.held <- struct{}{}
			<-r.release
		}
	}
	return r.Encode(texts, prefix)
}

func (r *recorder) Search(q []float32, k int, dist []float32, labels []int64) error {
	n := len(q) / r.Dim()
	if r.hold(nil, n) {
		r.held <- struct{}{}
		<-r.release
	}
	r.log(fmt.Sprintf("search %d", n))
	return r.Index.Search(q, k, dist, labels)
}

// texts returns n texts named prefix0, prefix1, ...
func texts(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}

// searchAsync runs b.Search(queries, k 2) on a goroutine and checks its answers against the
// direct search of r once it returns; the channel gets its error.
func searchAsync(b *engine.Batcher, r *recorder, queries []string) chan error {
	done := make(chan error, 1)
	go func() {
		dist, labels := make([]float32, 2*len(queries)), make([]int64, 2*len(queries))
		err := b.Search(context.Background(), queries, 2, dist, labels)
		if err == nil {
			vecs, _ := r.Encode(queries, "")
			wantD, wantL := make([]float32, len(dist)), make([]int64, len(labels))
			r.Index.Search(vecs, 2, wantD, wantL)
			if !slices.Equal(labels, wantL) || !slices.Equal(dist, wantD) {
				err = fmt.Errorf("%v: got %v %v, want %v %v", queries, labels, dist, wantL, wantD)
			}
		}
		done <- err
	}()
	return done
}

// answered checks that every Search of dones succeeded.
func answered(t *testing.T, dones ...chan error) {
	t.Helper()
	for _, done := range dones {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// Two big requests take turns, a batch each, from the moment the second arrives.
func TestBatcherRoundRobinsBigRequests(t *testing.T) {
	r := newRecorder(func(texts []string, _ int) bool { return len(texts) > 0 && texts[0] == "a0" })
	b := enginetest.NewBatcher(t, r, r, "", engine.BatcherOptions{MaxBatch: 4})
	defer b.Close()
	a := searchAsync(b, r, texts("a", 12))
	<-r.held // a's first batch is being encoded; a is queued again for its next turn
	c := searchAsync(b, r, texts("c", 12))
	for b.Queued() != 24 {
		time.Sleep(time.Millisecond)
	}
	close(r.release)
	answered(t, a, c)
	var batches []string
	for _, e := range r.events {
		if first, ok := strings.CutSuffix(e, " layer 0"); ok {
			batches = append(batches, first)
		}
	}
	if want := []string{"a0", "a4", "c0", "a8", "c4", "c8"}; !slices.Equal(batches, want) {
		t.Errorf("batches began with %v, want %v (a request that arrives behind a big one gets every other batch)", batches, want)
	}
}

// stopped is a clock that stands still: the gate never finds bulk work owed time, so the
// order of the lanes' work is the same on a loaded machine (internal/gate tests the shares).
func stopped() time.Time { return time.Time{} }

// A single query that arrives while a big request's batch is encoded waits for the op in
// flight, not for the batch: it is encoded and searched at the batch's next pause point, and
// the batch goes on after it.
func TestBatcherSingleQueryGoesAtTheNextPausePoint(t *testing.T) {
	r := newRecorder(func(texts []string, _ int) bool { return len(texts) > 0 && texts[0] == "a0" })
	b := enginetest.NewBatcher(t, r, r, "", engine.BatcherOptions{MaxBatch: 4, Clock: stopped})
	defer b.Close()
	a := searchAsync(b, r, texts("a", 8))
	<-r.held
	s := searchAsync(b, r, []string{"s0"})
	for b.Queued() != 9 {
		time.Sleep(time.Millisecond)
	}
	close(r.release)
	answered(t, s, a)
	if want := []string{"a0 layer 0", "s0 layer 0", "s0 layer 1", "search 1", "a0 layer 1"}; !slices.Equal(r.events[:5], want) {
		t.Errorf("events %v, want them to begin with %v", r.events, want)
	}
	if b.BulkPauses() == 0 {
		t.Error("no bulk pause counted")
	}
}

// While a single query waits (its search is held), the big request that arrives after it does
// not start a batch: it waits at the gate until the single query is answered.
func TestBatcherBigRequestWaitsForASingleQuery(t *testing.T) {
	r := newRecorder(func(_ []string, queries int) bool { return queries == 1 })
	b := enginetest.NewBatcher(t, r, r, "", engine.BatcherOptions{MaxBatch: 4, Clock: stopped})
	defer b.Close()
	s := searchAsync(b, r, []string{"s0"})
	<-r.held // the single query's search
	a := searchAsync(b, r, texts("a", 8))
	for b.BulkPauses() == 0 { // a waits at the gate
		time.Sleep(time.Millisecond)
	}
	close(r.release)
	answered(t, s, a)
	if want := []string{"s0 layer 0", "s0 layer 1", "search 1", "a0 layer 0"}; !slices.Equal(r.events[:4], want) {
		t.Errorf("events %v, want them to begin with %v", r.events, want)
	}
}
