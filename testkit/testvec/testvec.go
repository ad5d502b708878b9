// Package testvec makes the vectors that index and search tests use, deterministic per seed,
// and lays them out as index files store them.
package testvec

import (
	"math"
	"math/rand/v2"
)

// Unit returns n unit vectors of dim floats (normalized Gaussians, as e5's embeddings are
// unit length).
func Unit(n, dim int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	v := make([]float32, n*dim)
	for i := 0; i < n; i++ {
		row := v[i*dim : (i+1)*dim]
		var norm float64
		for j := range row {
			row[j] = float32(r.NormFloat64())
			norm += float64(row[j]) * float64(row[j])
		}
		for j := range row {
			row[j] /= float32(math.Sqrt(norm))
		}
	}
	return v
}

// Clustered returns n unit vectors of dim floats shaped as text embeddings are, which is what
// approximate indexes must be tested on (Gaussians have no clusters for IVF to find and no
// structure for PQ): a common direction, clusters of uneven sizes, and the spread inside a
// cluster in a subspace of dim/8 dimensions, plus a little isotropic noise. The same seed
// gives the same clusters, so Clustered(nq, dim, seed, draw) with another draw gives queries
// near the data (never copies of rows). bench/wiki18_shape.py is the full-scale version.
func Clustered(n, dim int, seed, draw uint64) []float32 {
	model := rand.New(rand.NewPCG(seed, 5))
	sub := max(dim/8, 1)
	basis := make([]float64, sub*dim) // the subspace of the spread, a decaying spectrum
	for i := range basis {
		basis[i] = model.NormFloat64() / math.Sqrt(float64(i/dim+1)) / math.Sqrt(float64(dim))
	}
	const clusters = 64
	centres := make([]float64, clusters*sub)
	for i := range centres {
		centres[i] = model.NormFloat64()
	}
	common := make([]float64, dim)
	for i := range common {
		common[i] = model.NormFloat64() / math.Sqrt(float64(dim))
	}
	r := rand.New(rand.NewPCG(seed, 6+draw))
	v := make([]float32, n*dim)
	z := make([]float64, sub)
	row := make([]float64, dim)
	for i := 0; i < n; i++ {
		c := int(float64(clusters) * math.Pow(r.Float64(), 2)) // uneven sizes: the first clusters are the largest
		for j := range z {
			z[j] = centres[c*sub+j] + 0.5*r.NormFloat64()
		}
		var norm float64
		for t := range row {
			x := common[t] + 0.05*r.NormFloat64()/math.Sqrt(float64(dim))
			for j := range z {
				x += basis[j*dim+t] * z[j]
			}
			row[t] = x
			norm += x * x
		}
		for t := range row {
			v[i*dim+t] = float32(row[t] / math.Sqrt(norm))
		}
	}
	return v
}

// SmallInts returns n vectors of dim integers in [-2, 2]: their inner products and squared
// distances are exact in float32 whatever the summation order, and many of them tie, so
// two searches must agree on every id and score.
func SmallInts(n, dim int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 3))
	v := make([]float32, n*dim)
	for i := range v {
		v[i] = float32(r.IntN(5) - 2)
	}
	return v
}
