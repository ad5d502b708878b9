package engine

import (
	"context"

	"needle/internal/gate"
)

// laneSearcher gives a Searcher served without a Batcher (BM25 alone) the Batcher's two lanes
// (docs/fair-batching.md, internal/gate): a request of at most maxInteractive queries is an
// interactive job and runs as an interactive unit of the gate; a larger one is a bulk unit
// whose Searcher pauses between its queries (gate.Wait) when interactive work is held. So a
// rollout's single query beside a 2,000-query POST waits for one query of it, not all.
type laneSearcher struct {
	Searcher
	maxInteractive int
	gate           gate.Gate
}

func (l *laneSearcher) Search(ctx context.Context, queries []string, k int, dist []float32, labels []int64) error {
	if !l.inBulkLane(len(queries)) {
		l.gate.Enter()
		defer l.gate.Leave()
		u, err := l.gate.Interactive(ctx)
		if err != nil {
			return err
		}
		defer u.End()
		return l.Searcher.Search(ctx, queries, k, dist, labels)
	}
	u, err := l.gate.Begin(ctx, true)
	if err != nil {
		return err
	}
	defer u.End()
	return l.Searcher.Search(gate.With(ctx, u), queries, k, dist, labels)
}

// inBulkLane reports whether a Search of n queries runs in the bulk lane.
func (l *laneSearcher) inBulkLane(n int) bool { return n > l.maxInteractive }
