package engine

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"needle/internal/option"
)

// ranked is a Searcher answering every query with the same ranking.
type ranked struct {
	rows   []int64
	scores []float32
}

func (r ranked) Search(_ context.Context, queries []string, k int, dist []float32, labels []int64) error {
	for q := range queries {
		for j := range k {
			labels[q*k+j], dist[q*k+j] = -1, 0
			if j < len(r.rows) {
				labels[q*k+j], dist[q*k+j] = r.rows[j], r.scores[j]
			}
		}
	}
	return nil
}

func TestFusion(t *testing.T) {
	dense := ranked{[]int64{1, 2, 3}, []float32{0.9, 0.8, 0.1}}
	sparse := ranked{[]int64{3, 4}, []float32{12, 2}}
	for _, c := range []struct {
		opt  FusionOptions
		want []int64
	}{
		// RRF: row 3 is 3rd and 1st: 1/63 + 1/61 beats row 1's 1/61 alone; 2 (1/62) beats 4 (1/62, higher row).
		{FusionOptions{Method: FusionRRF}, []int64{3, 1, 2, 4, -1}},
		// weighted 0.5: 1: 0.5, 2: 0.5*0.875, 3: 0 + 0.5, 4: 0: ties go to the lower row.
		{FusionOptions{Method: FusionWeighted, Weight: 0.5}, []int64{1, 3, 2, 4, -1}},
		{FusionOptions{Method: FusionWeighted, Weight: 0.9}, []int64{1, 2, 3, 4, -1}},
	} {
		f, err := NewFusion(dense, sparse, c.opt)
		if err != nil {
			t.Fatal(err)
		}
		dist, labels := make([]float32, 10), make([]int64, 10)
		if err := f.Search(context.Background(), []string{"a", "b"}, 5, dist, labels); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(labels[:5], c.want) || !slices.Equal(labels[5:], c.want) {
			t.Errorf("%+v: rows %v, want %v twice", c.opt, labels, c.want)
		}
	}
	for _, c := range []struct {
		opt   FusionOptions
		field string
	}{
		{FusionOptions{Method: "max"}, "Fusion.Method"},
		{FusionOptions{Method: FusionWeighted}, "Fusion.Weight"},
		{FusionOptions{Method: FusionWeighted, Weight: -0.5}, "Fusion.Weight"},
		{FusionOptions{Method: FusionWeighted, Weight: 1.5}, "Fusion.Weight"},
		{FusionOptions{Method: FusionWeighted, Weight: math.NaN()}, "Fusion.Weight"},
		{FusionOptions{Method: FusionRRF, Weight: 2}, "Fusion.Weight"},
	} {
		var oe *option.Error
		if _, err := NewFusion(dense, sparse, c.opt); !errors.As(err, &oe) || oe.Field != c.field {
			t.Errorf("%+v: error %v, want one of option %s", c.opt, err, c.field)
		}
	}
}
