package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// bruteForce is an exact inner-product Searcher over rows: the oracle for RecallAt.
type bruteForce struct {
	rows []float32
	dim  int
}

func (b bruteForce) Search(x []float32, k int, dist []float32, labels []int64) error {
	n := len(b.rows) / b.dim
	for q := 0; q < len(x)/b.dim; q++ {
		order := make([]int, n)
		score := make([]float32, n)
		for i := range order {
			order[i] = i
			for j := 0; j < b.dim; j++ {
				score[i] += x[q*b.dim+j] * b.rows[i*b.dim+j]
			}
		}
		slices.SortStableFunc(order, func(a, c int) int { return -cmpFloat(score[a], score[c]) })
		for i := 0; i < k; i++ {
			labels[q*k+i], dist[q*k+i] = int64(order[i]), score[order[i]]
		}
	}
	return nil
}

func cmpFloat(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestRecall(t *testing.T) {
	// Rows are the unit axes of R^3 plus a diagonal; queries lean towards one axis each.
	s := bruteForce{dim: 3, rows: []float32{1, 0, 0, 0, 1, 0, 0, 0, 1, 0.6, 0.6, 0}}
	q := []float32{0.9, 0.1, 0, 0.1, 0.2, 0.9, 0.5, 0.5, 0}
	got, err := RecallAt(s, q, 3, []int64{0, 1, 3}, []int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	// q0 -> 0 first (hit@1); q1 -> 2, 1 (hit@2); q2 -> 3 first (hit@1).
	if got[0] != 2.0/3 || got[1] != 1 {
		t.Fatalf("RecallAt = %v, want [2/3 1]", got)
	}
	if _, err := RecallAt(s, q[:4], 3, []int64{0, 1}, []int{1}); err == nil {
		t.Fatal("RecallAt accepted a ragged embedding buffer")
	}
}

func TestReadQueries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.jsonl")
	os.WriteFile(path, []byte("{\"query\":\"a b\",\"gold\":4,\"synset\":\"n1\"}\n{\"query\":\"c\",\"gold\":0}\n"), 0o644)
	qs, err := ReadQueries(path)
	if err != nil || len(qs) != 2 || qs[0] != (Query{"a b", 4}) || qs[1].Gold != 0 {
		t.Fatalf("ReadQueries = %+v, %v", qs, err)
	}
	for _, bad := range []string{`{"query":"x"}`, `{"gold":1}`, `[1]`} {
		os.WriteFile(path, []byte("{\"query\":\"ok\",\"gold\":1}\n"+bad+"\n"), 0o644)
		if _, err := ReadQueries(path); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%s: err %v, want one naming line 2", bad, err)
		}
	}
}

// scored is a Searcher answering fixed hits for every query.
type scored struct {
	labels []int64
	dist   []float32
}

func (s scored) Search(q []float32, k int, dist []float32, labels []int64) error {
	copy(labels, s.labels)
	copy(dist, s.dist)
	return nil
}

// Agreement counts hits by score: a row tied with exact's k-th counts, a worse one does not,
// for inner products (best first = largest) and L2 distances (smallest).
func TestAgreement(t *testing.T) {
	q := []float32{1}
	for _, tc := range []struct {
		got, exact scored
		want       float64
	}{
		{scored{[]int64{1, 9}, []float32{0.9, 0.5}}, scored{[]int64{1, 2}, []float32{0.9, 0.5}}, 1},   // 9 ties with 2
		{scored{[]int64{1, 9}, []float32{0.9, 0.4}}, scored{[]int64{1, 2}, []float32{0.9, 0.5}}, 0.5}, // 9 is worse
		{scored{[]int64{1, -1}, []float32{0.9, 0}}, scored{[]int64{1, 2}, []float32{0.9, 0.5}}, 0.5},  // a missing hit
		{scored{[]int64{1, 9}, []float32{0.1, 0.3}}, scored{[]int64{1, 2}, []float32{0.1, 0.3}}, 1},   // L2: tie
		{scored{[]int64{1, 9}, []float32{0.1, 0.4}}, scored{[]int64{1, 2}, []float32{0.1, 0.3}}, 0.5}, // L2: worse
	} {
		if got, err := Agreement(tc.got, tc.exact, q, 1, 2); err != nil || got != tc.want {
			t.Errorf("Agreement(%v, %v) = %v, %v; want %v", tc.got, tc.exact, got, err, tc.want)
		}
	}
}
