// Package testvec makes the vectors that index and search tests use, deterministic per seed,
// and lays them out as index files store them.
package testvec

import (
	"encoding/binary"
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

// Bytes returns v as little-endian float32s, the layout of FAISS files and memmaps.
func Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}
