package bm25

import (
	"slices"
	"testing"
)

// TestTiesLikeAnserini: the outputs are those of Anserini 0.22.1's ScoreTiesAdjusterReranker on
// the same float scores (bench/anserini_ties/Ties.java).
func TestTiesLikeAnserini(t *testing.T) {
	for _, c := range []struct{ in, want []float32 }{
		{[]float32{0.3001, 0.3, 0.2999, 0.2998, 0.299}, []float32{0.3001, 0.299999, 0.299898, 0.299797, 0.299}},
		{[]float32{1.2346, 1.2345, 1.2345, 1.2344}, []float32{1.2346, 1.2344991, 1.234498, 1.234397}},
		{[]float32{6.97165, 6.97155, 6.9715}, []float32{6.9717, 6.9715, 6.971499}},
		{[]float32{2.50005, 2.50005, 2.5, 2.4999, 2.4999}, []float32{2.5001, 2.500099, 2.499998, 2.499897, 2.499896}},
		{[]float32{10.00005, 10.0, 9.9999, 9.9998}, []float32{10.0, 9.999999, 9.999898, 9.999797}},
		{[]float32{5.0e-5, 4.0e-5, 0.0}, []float32{0.0, -1.0e-6, -2.0e-6}},
		{[]float32{7.30015, 7.3001, 7.30005, 7.3}, []float32{7.3001, 7.300099, 7.2999983, 7.2999973}},
	} {
		got := slices.Clone(c.in)
		adjustTies(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%v: got %v, Anserini %v", c.in, got, c.want)
		}
	}
}
