package engine_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"

	"needle/engine"
	"needle/testkit/enginetest"
)

// TestRetrieveBatchInvariant, the guarantee of docs/batch-invariance.md end to end: real MiniLM
// and a mapped flat index, through the server's batcher. A query's hits (rows and score bits)
// are the same asked alone, inside one 2,560-query request, and asked one by one while that
// request is in flight (so that they share batches with its queries), at fp16 and int8.
func TestRetrieveBatchInvariant(t *testing.T) {
	passages := make([]string, 600)
	for i := range passages {
		passages[i] = fmt.Sprintf("passage %d about %s and %s", i, topics[i%len(topics)], topics[(i*7+3)%len(topics)])
	}
	model, dir, _, _ := realParts(t, passages)
	queries := make([]string, 2560)
	for i := range queries {
		queries[i] = fmt.Sprintf("what about %s %d", topics[(i*5+1)%len(topics)], i)
	}
	probes := []int{0, 999, 2559}
	for _, prec := range []string{"fp16", "int8"} {
		r, err := engine.Open(enginetest.Options(engine.Options{Index: filepath.Join(dir, "flat.index"), Corpus: filepath.Join(dir, "corpus.jsonl"),
			Model: model, QueryPrefix: ptr("query: "), Precision: prec}))
		if err != nil {
			t.Fatal(err)
		}
		alone := map[int][]engine.Hit{}
		for _, p := range probes {
			hits, err := r.Retrieve(context.Background(), queries[p:p+1], 5)
			if err != nil {
				t.Fatal(err)
			}
			alone[p] = hits[0]
		}
		var wg sync.WaitGroup
		var big [][]engine.Hit
		var bigErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			big, bigErr = r.Retrieve(context.Background(), queries, 5)
		}()
		during := map[int][]engine.Hit{}
		for _, p := range probes { // while the big request is encoded
			hits, err := r.Retrieve(context.Background(), queries[p:p+1], 5)
			if err != nil {
				t.Fatal(err)
			}
			during[p] = hits[0]
		}
		wg.Wait()
		if bigErr != nil {
			t.Fatal(bigErr)
		}
		for _, p := range probes {
			for name, got := range map[string][]engine.Hit{"in the 2,560-query request": big[p], "asked during it": during[p]} {
				want := alone[p]
				if len(got) != len(want) {
					t.Fatalf("%s query %d %s: %d hits, %d alone", prec, p, name, len(got), len(want))
				}
				for i := range want {
					if string(got[i].Row) != string(want[i].Row) || math.Float32bits(got[i].Score) != math.Float32bits(want[i].Score) {
						t.Fatalf("%s query %d %s: hit %d (%s, %g), alone (%s, %g)", prec, p, name, i, got[i].Row, got[i].Score, want[i].Row, want[i].Score)
					}
				}
			}
		}
		r.Close()
	}
}

var topics = []string{"rivers", "the sea", "steel pins", "cats", "mathematics", "old roads", "music", "winter",
	"bread", "ships", "birds", "copper", "glass", "forests", "kings", "trains", "stars", "salt", "wool", "bridges"}
