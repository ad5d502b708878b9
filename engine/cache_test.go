package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"needle/engine"
	"needle/testkit/enginetest"
)

// A single query whose text a bulk request is searching does not wait for the bulk lane: it
// searches the text itself in the interactive lane. The bulk request is held at the gate by
// an interactive request whose encoding is held, so without the lift the single query would
// wait until that hold ends; the timeout only bounds how long the failure takes to show.
func TestRetrieveInteractiveQueryLiftsBulkWork(t *testing.T) {
	hash := &enginetest.HashEncoder{Dimension: 16}
	docs, idx := enginetest.Corpus(hash, corpusTexts(30))
	enc := &enginetest.GatedEncoder{Encoder: hash, Started: make(chan struct{}, 1), Release: make(chan struct{}),
		Hold: func(texts []string) bool { return texts[0] == "hold" }}
	// Two interactive encoders: one is held, the other encodes the single query.
	r, err := engine.NewRetriever(enc, idx, docs, nil, "", enginetest.Batcher(engine.BatcherOptions{MaxBatch: 4, Encoders: 2}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	release := sync.OnceFunc(func() { close(enc.Release) })
	defer release() // before Close, which waits for the held work
	r.WithCache(1 << 20)
	type answer struct {
		hits [][]engine.Hit
		err  error
	}
	retrieve := func(queries ...string) chan answer {
		c := make(chan answer, 1)
		go func() {
			hits, err := r.Retrieve(context.Background(), queries, 3)
			c <- answer{hits, err}
		}()
		return c
	}
	holder := retrieve("hold")
	<-enc.Started
	bulk := retrieve("topic3 word5", "doc1", "doc2", "doc3", "doc4", "doc5", "doc6", "doc7")
	for r.BulkPauses() == 0 { // the bulk request's first batch waits at the gate
		time.Sleep(time.Millisecond)
	}
	single := retrieve("topic3 word5")
	var alone answer
	select {
	case alone = <-single:
	case <-time.After(10 * time.Second):
		t.Fatal("the single query waited for the bulk request's search of its text")
	}
	if alone.err != nil {
		t.Fatal(alone.err)
	}
	if s := r.CacheStats(); s.Lifted != 1 || s.Coalesced != 0 {
		t.Errorf("CacheStats = %+v, want 1 lifted and none coalesced", s)
	}
	release()
	big := <-bulk
	if a := <-holder; big.err != nil || a.err != nil {
		t.Fatal(big.err, a.err)
	}
	if len(alone.hits[0]) != 3 || !sameHits(alone.hits[0], big.hits[0]) {
		t.Errorf("single %v, bulk %v: want the same 3 hits", alone.hits[0], big.hits[0])
	}
}
