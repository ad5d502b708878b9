package engine

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"needle/internal/option"
)

// FusionOptions say how Fusion merges a dense and a sparse ranking (`needle serve --bm25`).
type FusionOptions struct {
	// Method is FusionRRF ("" too) or FusionWeighted.
	Method string
	// Candidates is how many hits each retriever contributes per query (0: max(k, 100)).
	Candidates int
	// RRFK is reciprocal rank fusion's constant (0: 60, the value of Cormack et al.).
	RRFK float64
	// Weight is the dense share of FusionWeighted's sum of min-max normalized scores (the
	// sparse share is 1 - Weight), in (0, 1]; FusionRRF does not read it (0 there, or in
	// range: a value out of range is a mistake whichever the method).
	Weight float64
}

// The fusion methods.
const (
	// FusionRRF scores a row by the sum over retrievers of 1 / (RRFK + rank), rank from 1.
	FusionRRF = "rrf"
	// FusionWeighted scores a row by Weight * dense + (1 - Weight) * sparse, each score
	// min-max normalized over its retriever's candidates (0 where a retriever missed it).
	FusionWeighted = "weighted"
)

// Fusion is the hybrid retriever: the dense and sparse searches of a query run side by
// side, and their candidates are merged into one ranking. Ties go to the lower row.
type Fusion struct {
	dense, sparse Searcher
	opt           FusionOptions
}

// NewFusion fuses dense and sparse as opt says.
func NewFusion(dense, sparse Searcher, opt FusionOptions) (*Fusion, error) {
	if err := opt.check(); err != nil {
		return nil, err
	}
	opt.Method = cmp.Or(opt.Method, FusionRRF)
	if opt.RRFK <= 0 {
		opt.RRFK = 60
	}
	return &Fusion{dense: dense, sparse: sparse, opt: opt}, nil
}

// check refuses an unknown method and a weight out of range.
func (opt FusionOptions) check() error {
	switch opt.Method {
	case "", FusionRRF, FusionWeighted:
	default:
		return option.Errorf("Fusion.Method", "%q, want %q or %q", opt.Method, FusionRRF, FusionWeighted)
	}
	if inRange := opt.Weight > 0 && opt.Weight <= 1; !inRange && (opt.Weight != 0 || opt.Method == FusionWeighted) {
		return option.Errorf("Fusion.Weight", "%g, want the dense share of the weighted sum, in (0, 1]", opt.Weight)
	}
	return nil
}

// Search implements Searcher.
func (f *Fusion) Search(ctx context.Context, queries []string, k int, dist []float32, labels []int64) error {
	n, c := len(queries), max(k, f.opt.Candidates)
	if f.opt.Candidates == 0 {
		c = max(k, 100)
	}
	dd, dl := make([]float32, n*c), make([]int64, n*c)
	sd, sl := make([]float32, n*c), make([]int64, n*c)
	var wg sync.WaitGroup
	var sparseErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		sparseErr = f.sparse.Search(ctx, queries, c, sd, sl)
	}()
	denseErr := f.dense.Search(ctx, queries, c, dd, dl)
	wg.Wait()
	if denseErr != nil {
		return denseErr
	}
	if sparseErr != nil {
		return sparseErr
	}
	scores := map[int64]float64{}
	for q := range n {
		clear(scores)
		f.add(scores, dd[q*c:(q+1)*c], dl[q*c:(q+1)*c], f.opt.Weight)
		f.add(scores, sd[q*c:(q+1)*c], sl[q*c:(q+1)*c], 1-f.opt.Weight)
		rows := make([]int64, 0, len(scores))
		for row := range scores {
			rows = append(rows, row)
		}
		slices.SortFunc(rows, func(a, b int64) int {
			switch sa, sb := scores[a], scores[b]; {
			case sa > sb:
				return -1
			case sa < sb:
				return 1
			}
			return int(a - b)
		})
		for j := range k {
			i := q*k + j
			labels[i], dist[i] = -1, 0
			if j < len(rows) {
				labels[i], dist[i] = rows[j], float32(scores[rows[j]])
			}
		}
	}
	return nil
}

// add adds one retriever's ranking (best first, -1 past its last hit) to scores.
func (f *Fusion) add(scores map[int64]float64, dist []float32, labels []int64, weight float64) {
	lo, hi := float32(0), float32(0)
	hits := 0
	for i, l := range labels {
		if l < 0 {
			break
		}
		if i == 0 || dist[i] < lo {
			lo = dist[i]
		}
		if i == 0 || dist[i] > hi {
			hi = dist[i]
		}
		hits++
	}
	for i, l := range labels[:hits] {
		switch f.opt.Method {
		case FusionRRF:
			scores[l] += 1 / (f.opt.RRFK + float64(i+1))
		default:
			v := 1.0
			if hi > lo {
				v = float64(dist[i]-lo) / float64(hi-lo)
			}
			scores[l] += weight * v
		}
	}
}
