package faissgo

import (
	"fmt"
	"testing"
)

// BenchmarkFlatSearch searches an e5-shaped flat IP index (768 dims) with batches of 1, 16
// and 64 queries, with BLAS from batch size 1 (Init) and from FAISS's default of 20.
// Compare queries/s within one run: the ratio is the point, not the absolute figure.
func BenchmarkFlatSearch(b *testing.B) {
	const dim, n, k = 768, 50000, 10
	x := mustBuild(b, dim, "Flat", IP, randomVectors(n, dim, 21))
	queries := randomVectors(64, dim, 22)
	defer setBLASThreshold(1)
	for _, batch := range []int{1, 2, 4, 8, 16, 64} {
		for _, threshold := range []int{1, 20} {
			b.Run(fmt.Sprintf("batch=%d/blas_from=%d", batch, threshold), func(b *testing.B) {
				setBLASThreshold(threshold)
				q := queries[:batch*dim]
				dist, labels := make([]float32, batch*k), make([]int64, batch*k)
				b.SetBytes(int64(batch) * n * dim * 4) // index bytes scanned per op
				b.ReportAllocs()
				for b.Loop() {
					if err := x.Search(q, k, dist, labels); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "queries/s")
			})
		}
	}
}
