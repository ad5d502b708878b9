package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"needle/engine"
	"needle/internal/lru"
	"needle/testkit/enginetest"
)

func TestNewRetrieverChecksShapes(t *testing.T) {
	enc := &enginetest.HashEncoder{Dimension: 8}
	docs, idx := enginetest.Corpus(enc, corpusTexts(10))
	if _, err := engine.NewRetriever(&enginetest.HashEncoder{Dimension: 4}, idx, docs, nil, "", enginetest.Batcher(engine.BatcherOptions{})); err == nil {
		t.Error("dimension mismatch accepted")
	}
	short := &enginetest.Docs{Lines: docs.Lines[:9]}
	if _, err := engine.NewRetriever(enc, idx, short, nil, "", enginetest.Batcher(engine.BatcherOptions{})); err == nil {
		t.Error("corpus/index row count mismatch accepted")
	}
	r, err := engine.NewRetriever(enc, idx, docs, nil, "", enginetest.Batcher(engine.BatcherOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if r.Ntotal() != 10 {
		t.Errorf("Ntotal %d, want 10", r.Ntotal())
	}
}

// newRetriever serves corpusTexts(n) through the fakes, with queries prefixed "query: ".
func newRetriever(t *testing.T, n int, wrap func(engine.DocStore) engine.DocStore) (*engine.Retriever, *enginetest.Docs, engine.Encoder, engine.Index) {
	t.Helper()
	enc := &enginetest.HashEncoder{Dimension: 16}
	docs, idx := enginetest.Corpus(enc, corpusTexts(n))
	var ds engine.DocStore = docs
	if wrap != nil {
		ds = wrap(docs)
	}
	pages := enginetest.Pages{"https://en.wikipedia.org/w/index.php?title=A": `{"url":"A"}`}
	r, err := engine.NewRetriever(enc, idx, ds, pages, "query: ", enginetest.Batcher(engine.BatcherOptions{MaxBatch: 4}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, docs, enc, idx
}

// The oracle is the fake index searched directly, each label's corpus line read directly.
func TestRetrieveMatchesDirectSearch(t *testing.T) {
	r, docs, enc, idx := newRetriever(t, 30, nil)
	queries := []string{"topic1 word3", "doc7", "", "nothing matches", "shared"}
	const k = 35 // above Ntotal: the last 5 labels of each query are -1 and left out
	got, err := r.Retrieve(context.Background(), queries, k)
	if err != nil {
		t.Fatal(err)
	}
	wantD, wantL := direct(t, enc, idx, queries, k)
	if len(got) != len(queries) {
		t.Fatalf("%d hit lists for %d queries", len(got), len(queries))
	}
	for q, hits := range got {
		if len(hits) != 30 {
			t.Fatalf("query %d: %d hits, want the 30 rows", q, len(hits))
		}
		for j, h := range hits {
			row, _ := docs.Row(wantL[q*k+j])
			if !slices.Equal(h.Row, row) || h.Score != wantD[q*k+j] {
				t.Fatalf("query %d hit %d: (%s, %v), want (%s, %v)", q, j, h.Row, h.Score, row, wantD[q*k+j])
			}
		}
	}
	for _, tc := range []struct {
		queries []string
		k       int
	}{{nil, 3}, {queries, 0}} {
		got, err := r.Retrieve(context.Background(), tc.queries, tc.k)
		if err != nil || len(got) != len(tc.queries) || slices.ContainsFunc(got, func(h []engine.Hit) bool { return len(h) > 0 }) {
			t.Errorf("%d queries, k %d: %v, %v; want %d empty lists", len(tc.queries), tc.k, got, err, len(tc.queries))
		}
	}
}

func TestRetrieveLeavesBadRowsOutAndCountsThem(t *testing.T) {
	r, _, _, _ := newRetriever(t, 20, func(d engine.DocStore) engine.DocStore { return enginetest.EvenRowsBad{DocStore: d} })
	got, err := r.Retrieve(context.Background(), []string{"topic1", "topic2"}, 20)
	if err != nil {
		t.Fatal(err)
	}
	for q, hits := range got {
		if len(hits) != 10 {
			t.Errorf("query %d: %d hits, want the 10 odd rows of 20", q, len(hits))
		}
		for _, h := range hits {
			var id int
			if _, err := fmt.Sscanf(string(h.Row), `{"id": "%d"`, &id); err != nil || id%2 == 0 {
				t.Errorf("query %d: row %s returned", q, h.Row)
			}
		}
	}
	if n := r.BadRowsSkipped(); n != 20 {
		t.Errorf("BadRowsSkipped = %d, want 20", n)
	}
}

// failingDocs fails every read, as a corpus whose file became unreadable.
type failingDocs struct{ engine.DocStore }

func (failingDocs) Row(int64) ([]byte, error) { return nil, errors.New("input/output error") }

func TestRetrieveErrors(t *testing.T) {
	r, _, _, _ := newRetriever(t, 10, func(d engine.DocStore) engine.DocStore { return failingDocs{d} })
	_, err := r.Retrieve(context.Background(), []string{"a"}, 2)
	if want := "reading the corpus: corpus row "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("unreadable corpus: %v, want an error starting %q", err, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Retrieve(ctx, []string{"a"}, 2); !errors.Is(err, context.Canceled) || err.Error() != "retrieval failed: context canceled" {
		t.Errorf("canceled request: %v, want retrieval failed: context canceled", err)
	}
	if r.BadRowsSkipped() != 0 || r.Queued() != 0 {
		t.Errorf("after failed calls: %d bad rows, %d queued", r.BadRowsSkipped(), r.Queued())
	}
}

func TestAccess(t *testing.T) {
	r, _, _, _ := newRetriever(t, 5, nil)
	got, err := r.Access([]string{"https://en.wikipedia.org/w/index.php/A", "https://nowhere"})
	if err != nil || !r.HasPages() || len(got) != 2 || string(got[0]) != `{"url":"A"}` || got[1] != nil {
		t.Errorf("Access = %q", got)
	}
	enc := &enginetest.HashEncoder{Dimension: 4}
	docs, idx := enginetest.Corpus(enc, corpusTexts(3))
	noPages, err := engine.NewRetriever(enc, idx, docs, nil, "", enginetest.Batcher(engine.BatcherOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	defer noPages.Close()
	if got, err := noPages.Access([]string{"x"}); err != nil || noPages.HasPages() || len(got) != 1 || got[0] != nil {
		t.Errorf("without pages: HasPages %v, Access %q", noPages.HasPages(), got)
	}
}

// The cache answers a repeated (text, k) with the first answer's hits, without encoding;
// another k is another entry; repeats within one request are encoded once, cache or not.
func TestRetrieveCache(t *testing.T) {
	r, _, e, _ := newRetriever(t, 30, nil)
	enc := e.(*enginetest.HashEncoder)
	r.WithCache(1 << 20)
	encoded := func() int64 { return enc.Texts.Load() }
	// 10 queries of 3 texts span 3 batches of MaxBatch 4.
	queries := []string{"topic1 word3", "doc7", "topic1 word3", "doc7", "doc7", "topic2", "doc7", "topic1 word3", "doc7", "doc7"}
	before := encoded()
	first, err := r.Retrieve(context.Background(), queries, 3)
	if err != nil {
		t.Fatal(err)
	}
	if n := encoded() - before; n != 3 {
		t.Errorf("first request encoded %d texts, want its 3 distinct ones", n)
	}
	for q := range queries {
		if i := slices.Index(queries, queries[q]); !sameHits(first[q], first[i]) {
			t.Errorf("query %d (%q) got another answer than query %d", q, queries[q], i)
		}
	}
	before = encoded()
	again, err := r.Retrieve(context.Background(), queries, 3)
	if err != nil {
		t.Fatal(err)
	}
	if n := encoded() - before; n != 0 {
		t.Errorf("a repeated request encoded %d texts, want 0 (all cached)", n)
	}
	for q := range queries {
		if !sameHits(again[q], first[q]) {
			t.Errorf("query %d: cached %v, first %v", q, again[q], first[q])
		}
	}
	before = encoded()
	if _, err := r.Retrieve(context.Background(), queries[:1], 4); err != nil || encoded()-before != 1 {
		t.Errorf("another k: %v, encoded %d texts, want 1 (a miss)", err, encoded()-before)
	}
	s := r.CacheStats()
	hitBytes := int64(32) // a Hit: row slice header and score, padded
	want := engine.CacheStats{Stats: lru.Stats{Hits: 10, Misses: 4, Entries: 4, MaxBytes: 1 << 20,
		Bytes: int64(len("topic1 word3")*2+len("doc7")+len("topic2")) + (3*3+4)*hitBytes + 4*lru.EntryOverhead}}
	if s != want {
		t.Errorf("CacheStats = %+v, want %+v", s, want)
	}

	// A budget of about two entries evicts; the answers stay right.
	small, _, _, _ := newRetriever(t, 30, nil)
	small.WithCache(2 * (3*hitBytes + lru.EntryOverhead + 12))
	for range 2 {
		got, err := small.Retrieve(context.Background(), queries, 3)
		if err != nil {
			t.Fatal(err)
		}
		for q := range queries {
			if !sameHits(got[q], first[q]) {
				t.Errorf("small cache, query %d: %v, want %v", q, got[q], first[q])
			}
		}
	}
	if s := small.CacheStats(); s.Evictions == 0 || s.Bytes > s.MaxBytes || s.Entries > 2 {
		t.Errorf("small cache: %+v, want evictions and at most 2 entries", s)
	}

	// Without a cache every request is searched; the stats stay zero.
	plain, _, pe, _ := newRetriever(t, 30, nil)
	before = pe.(*enginetest.HashEncoder).Texts.Load()
	for range 2 {
		if _, err := plain.Retrieve(context.Background(), queries, 3); err != nil {
			t.Fatal(err)
		}
	}
	if n := pe.(*enginetest.HashEncoder).Texts.Load() - before; n != 6 || plain.CacheStats() != (engine.CacheStats{}) {
		t.Errorf("no cache: encoded %d texts (want 6), stats %+v", n, plain.CacheStats())
	}
}

// sameHits reports whether a and b hold the same rows and scores.
func sameHits(a, b []engine.Hit) bool {
	return slices.EqualFunc(a, b, func(x, y engine.Hit) bool { return string(x.Row) == string(y.Row) && x.Score == y.Score })
}

// Failed answers are not cached.
func TestRetrieveCacheKeepsNoErrors(t *testing.T) {
	r, _, _, _ := newRetriever(t, 10, func(d engine.DocStore) engine.DocStore { return failingDocs{d} })
	r.WithCache(1 << 20)
	for range 2 {
		if _, err := r.Retrieve(context.Background(), []string{"a"}, 2); err == nil {
			t.Fatal("unreadable corpus: no error")
		}
	}
	if s := r.CacheStats(); s.Hits != 0 || s.Entries != 0 {
		t.Errorf("after failed calls: %+v", s)
	}
}

// A query that another call is already searching waits for that search instead of being
// encoded again; when the leading call fails (its client went away), the waiting one
// searches the query itself; a waiter whose own context ends stops waiting.
func TestRetrieveCoalescesQueriesInFlight(t *testing.T) {
	hash := &enginetest.HashEncoder{Dimension: 16}
	docs, idx := enginetest.Corpus(hash, corpusTexts(30))
	enc := &enginetest.GatedEncoder{Encoder: hash, Started: make(chan struct{}, 8), Release: make(chan struct{})}
	r, err := engine.NewRetriever(enc, idx, docs, nil, "", enginetest.Batcher(engine.BatcherOptions{MaxBatch: 4}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.WithCache(1 << 20)
	type answer struct {
		hits [][]engine.Hit
		err  error
	}
	retrieve := func(ctx context.Context, queries ...string) chan answer {
		c := make(chan answer, 1)
		go func() {
			hits, err := r.Retrieve(ctx, queries, 3)
			c <- answer{hits, err}
		}()
		return c
	}
	waitFor := func(what string, cond func() bool) {
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	blocker := retrieve(context.Background(), "doc1") // holds the encoder
	<-enc.Started
	canceled, cancel := context.WithCancel(context.Background())
	leader := retrieve(canceled, "topic3 word5")
	waitFor("the leader to queue", func() bool { return r.Queued() == 2 })
	follower := retrieve(context.Background(), "topic3 word5", "doc2")
	waitFor("the follower to wait", func() bool { return r.CacheStats().Coalesced == 1 })
	waitFor("the follower's own query to queue", func() bool { return r.Queued() == 3 })
	gone, leave := context.WithCancel(context.Background())
	quitter := retrieve(gone, "topic3 word5")
	waitFor("a second follower to wait", func() bool { return r.CacheStats().Coalesced == 2 })
	leave()
	if a := <-quitter; !errors.Is(a.err, context.Canceled) { // while the encoder is still held
		t.Fatalf("a waiter whose context ended: %v", a.err)
	}
	cancel()
	close(enc.Release)
	if a := <-leader; !errors.Is(a.err, context.Canceled) {
		t.Fatalf("canceled leader: %v", a.err)
	}
	for _, c := range []chan answer{blocker, follower} {
		if a := <-c; a.err != nil {
			t.Fatal(a.err)
		}
	}
	before := hash.Texts.Load()
	same := retrieve(context.Background(), "topic3 word5")
	other := retrieve(context.Background(), "topic3 word5")
	a, b := <-same, <-other
	if a.err != nil || b.err != nil || !sameHits(a.hits[0], b.hits[0]) || len(a.hits[0]) != 3 {
		t.Fatalf("after the retry: %v %v, %v %v", a.hits, a.err, b.hits, b.err)
	}
	if n := hash.Texts.Load() - before; n != 0 {
		t.Errorf("the follower's retry was not cached: %d texts encoded again", n)
	}
	if s := r.CacheStats(); s.Entries != 3 || s.Coalesced != 2 {
		t.Errorf("CacheStats = %+v", s)
	}
}
