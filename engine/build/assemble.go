package build

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"needle/internal/atomicfile"
	"needle/internal/progress"
)

// vectors is what an index is built from: the shards of this build or an existing
// embeddings file. Not safe for concurrent use.
type vectors interface {
	Len() int64
	Dim() int
	// Read fills dst with rows [start, start+len(dst)/Dim()).
	Read(start int64, dst []float32) error
}

// addRows is how many rows assemble reads and adds per step (bounds its memory).
const addRows = 16384

// assemble builds the index from vecs (training it first on a seeded sample when the
// factory needs it), streams the rows into emb.memmap when asked, and writes the index.
func assemble(cfg Config, vecs vectors, newIndex func(dim int) (Index, error)) error {
	idx, err := newIndex(vecs.Dim())
	if err != nil {
		return err
	}
	defer idx.Close()
	if !idx.IsTrained() {
		if err := train(cfg, vecs, idx); err != nil {
			return err
		}
	}
	add := func(emb *bufio.Writer) error {
		bar := progress.Start(cfg.Log, progress.Options{Label: "rows indexed", Total: vecs.Len()})
		defer bar.Finish()
		buf := make([]float32, addRows*vecs.Dim())
		var raw []byte
		for start := int64(0); start < vecs.Len(); start += addRows {
			x := buf[:min(addRows, vecs.Len()-start)*int64(vecs.Dim())]
			if err := vecs.Read(start, x); err != nil {
				return err
			}
			if err := idx.Add(x); err != nil {
				return fmt.Errorf("index add at row %d: %w", start, err)
			}
			if emb != nil {
				raw = slices.Grow(raw[:0], 4*len(x))[:4*len(x)]
				putFloats(raw, x)
				if _, err := emb.Write(raw); err != nil {
					return err
				}
			}
			bar.Add(int64(len(x) / vecs.Dim()))
		}
		if emb != nil {
			return emb.Flush()
		}
		return nil
	}
	if cfg.SaveEmbeddings {
		err = atomicfile.Create(filepath.Join(cfg.Out, EmbeddingsFileName), func(f *os.File) error {
			return add(bufio.NewWriterSize(f, 4<<20))
		})
	} else {
		err = add(nil)
	}
	if err != nil {
		return err
	}
	if idx.Ntotal() != vecs.Len() {
		return fmt.Errorf("index holds %d rows after adding %d", idx.Ntotal(), vecs.Len())
	}
	if err := idx.WriteFile(filepath.Join(cfg.Out, IndexFileName)); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	return nil
}

// train trains idx on TrainSize rows drawn without replacement with cfg.Seed.
func train(cfg Config, vecs vectors, idx Index) error {
	k := int64(cfg.TrainSize)
	if k <= 0 {
		k = defaultTrainSize
	}
	k = min(k, vecs.Len())
	rows := sampleRows(vecs.Len(), k, cfg.Seed)
	dim := vecs.Dim()
	x := make([]float32, k*int64(dim))
	fmt.Fprintf(cfg.Log, "needle build: training %s on %d sampled rows (seed %d)\n", cfg.Factory, k, cfg.Seed)
	for i, r := range rows {
		if err := vecs.Read(r, x[i*dim:(i+1)*dim]); err != nil {
			return err
		}
	}
	if err := idx.Train(x); err != nil {
		return fmt.Errorf("train %s: %w", cfg.Factory, err)
	}
	return nil
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
