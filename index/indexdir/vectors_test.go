package indexdir

import (
	"slices"
	"testing"
)

func TestSampleRows(t *testing.T) {
	for _, c := range []struct{ n, k int64 }{{10, 10}, {1000, 7}, {5, 0}, {1 << 40, 100}} {
		got := sampleRows(c.n, c.k, 42)
		if int64(len(got)) != c.k || !slices.IsSorted(got) {
			t.Fatalf("sampleRows(%d, %d) = %v", c.n, c.k, got)
		}
		for i, r := range got {
			if r < 0 || r >= c.n || (i > 0 && got[i-1] == r) {
				t.Fatalf("sampleRows(%d, %d): bad or repeated row %d", c.n, c.k, r)
			}
		}
		if !slices.Equal(got, sampleRows(c.n, c.k, 42)) {
			t.Fatal("same seed, different sample")
		}
	}
	if slices.Equal(sampleRows(1000, 10, 1), sampleRows(1000, 10, 2)) {
		t.Fatal("different seeds, same sample")
	}
}
