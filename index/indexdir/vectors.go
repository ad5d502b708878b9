package indexdir

import (
	"io"
	"math/rand/v2"
	"slices"

	"needle/internal/progress"
)

// Vectors are what an index is built from: the shards of this build or an existing
// embeddings file. Not safe for concurrent use.
type Vectors interface {
	Len() int64
	Dim() int
	// Read fills dst with rows [start, start+len(dst)/Dim()).
	Read(start int64, dst []float32) error
}

// ChunkRows is how many rows StreamRows hands over per step (bounds the memory of a build or
// conversion: 48 MiB at dimension 768).
const ChunkRows = 16384

// StreamRows hands rows [from, Len) of vecs to use in order, ChunkRows at a time (each chunk
// but the last starts at a multiple of ChunkRows when from does); a progress bar on log
// counts the rows, those before from as done. x is reused for the next chunk.
func StreamRows(vecs Vectors, from int64, log io.Writer, use func(start int64, x []float32) error) error {
	bar := progress.Start(log, progress.Options{Label: "rows indexed", Total: vecs.Len(), Done: from})
	defer bar.Finish()
	dim := int64(vecs.Dim())
	buf := make([]float32, ChunkRows*dim)
	for start := from; start < vecs.Len(); start += ChunkRows {
		x := buf[:min(ChunkRows, vecs.Len()-start)*dim]
		if err := vecs.Read(start, x); err != nil {
			return err
		}
		if err := use(start, x); err != nil {
			return err
		}
		bar.Add(int64(len(x)) / dim)
	}
	return nil
}

// Sample reads k distinct rows of vecs (k <= Len) chosen by seed, in ascending row order: the
// training sample of an index, the same for the same seed whatever reads it.
func Sample(vecs Vectors, k, seed int64) ([]float32, error) {
	dim := vecs.Dim()
	x := make([]float32, k*int64(dim))
	for i, r := range sampleRows(vecs.Len(), k, seed) {
		if err := vecs.Read(r, x[i*dim:(i+1)*dim]); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// sampleRows returns k distinct rows of [0, n), ascending, chosen by Floyd's algorithm from
// seed: O(k) memory however large n is.
func sampleRows(n, k int64, seed int64) []int64 {
	r := rand.New(rand.NewPCG(uint64(seed), 0x6e65656466))
	chosen := make(map[int64]struct{}, k)
	for j := n - k; j < n; j++ {
		t := r.Int64N(j + 1)
		if _, dup := chosen[t]; dup {
			t = j
		}
		chosen[t] = struct{}{}
	}
	out := make([]int64, 0, k)
	for v := range chosen {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}
