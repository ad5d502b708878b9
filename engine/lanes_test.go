package engine

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"

	"needle/internal/gate"
)

// stepSearcher answers each query when the test sends on step, after a gate.Wait (as
// index/bm25 waits between queries), and logs the order in which queries were answered.
type stepSearcher struct {
	step chan struct{}
	mu   sync.Mutex
	log  []string
}

func (s *stepSearcher) Search(ctx context.Context, queries []string, k int, dist []float32, labels []int64) error {
	for _, q := range queries {
		if err := gate.Wait(ctx); err != nil {
			return err
		}
		if len(queries) > 1 {
			<-s.step
		}
		s.mu.Lock()
		s.log = append(s.log, q)
		s.mu.Unlock()
	}
	return nil
}

// TestLaneSearcherLetsSingleQueriesFirst: a single query that arrives while a bulk request is
// answered runs after the bulk query in flight, before the bulk request's next query.
func TestLaneSearcherLetsSingleQueriesFirst(t *testing.T) {
	s := &stepSearcher{step: make(chan struct{})}
	l := &laneSearcher{Searcher: s, maxInteractive: 1}
	bulkDone := make(chan error)
	go func() {
		bulkDone <- l.Search(context.Background(), []string{"b0", "b1", "b2"}, 1, make([]float32, 3), make([]int64, 3))
	}()
	s.step <- struct{}{} // b0 answered; the bulk request waits for its step of b1
	singleDone := make(chan error)
	go func() {
		singleDone <- l.Search(context.Background(), []string{"single"}, 1, make([]float32, 1), make([]int64, 1))
	}()
	for l.gate.Held() == 0 {
		runtime.Gosched()
	}
	s.step <- struct{}{} // b1 answered; the bulk request pauses before b2
	if err := <-singleDone; err != nil {
		t.Fatal(err)
	}
	s.step <- struct{}{}
	if err := <-bulkDone; err != nil {
		t.Fatal(err)
	}
	if want := []string{"b0", "b1", "single", "b2"}; !slices.Equal(s.log, want) {
		t.Errorf("answered %v, want %v", s.log, want)
	}
}
