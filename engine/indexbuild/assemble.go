package indexbuild

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"needle/faissgo"
	"needle/internal/atomicfile"
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

// assemble writes the index (and emb.memmap when asked) from vecs. Flat is streamed
// straight into FAISS's file format, so its memory stays at one chunk however large the
// index (wiki-18's 64.6 GB Flat index never has to fit in RAM); other factories are built
// in memory through FAISS (trained first on a seeded sample when they need it) and written
// by FAISS.
func assemble(cfg Config, vecs Vectors, newIndex func(dim int) (Index, error)) error {
	if cfg.Factory == "Flat" {
		return withEmbeddings(cfg, func(emb io.Writer) error {
			return writeFlatIndex(filepath.Join(cfg.Out, IndexFileName), cfg.Metric, vecs, cfg.Log, emb)
		})
	}
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
	err = withEmbeddings(cfg, func(emb io.Writer) error {
		var raw []byte
		return StreamRows(vecs, 0, cfg.Log, func(start int64, x []float32) error {
			if err := idx.Add(x); err != nil {
				return fmt.Errorf("index add at row %d: %w", start, err)
			}
			if emb != nil {
				return writeFloats(emb, x, &raw)
			}
			return nil
		})
	})
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

// withEmbeddings runs write with the writer of emb.memmap (created atomically, kept only if
// write succeeds) when cfg.SaveEmbeddings, else with nil.
func withEmbeddings(cfg Config, write func(emb io.Writer) error) error {
	if !cfg.SaveEmbeddings {
		return write(nil)
	}
	return atomicfile.Create(filepath.Join(cfg.Out, EmbeddingsFileName), func(f *os.File) error {
		w := bufio.NewWriterSize(f, 4<<20)
		if err := write(w); err != nil {
			return err
		}
		return w.Flush()
	})
}

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

// writeFloats writes x to w as little-endian float32s; *raw is reused scratch.
func writeFloats(w io.Writer, x []float32, raw *[]byte) error {
	*raw = slices.Grow((*raw)[:0], 4*len(x))[:4*len(x)]
	putFloats(*raw, x)
	_, err := w.Write(*raw)
	return err
}

// writeFlatIndex writes vecs to path atomically as a FAISS IndexFlatIP ("ip") or IndexFlatL2
// ("l2") file (faissgo.WriteFlat owns the format), streaming the rows so that memory stays
// at one chunk.
func writeFlatIndex(path, metric string, vecs Vectors, log io.Writer, emb io.Writer) error {
	m, err := faissgo.ParseMetric(metric)
	if err != nil {
		return err
	}
	err = atomicfile.Create(path, func(f *os.File) error {
		w := bufio.NewWriterSize(f, 4<<20)
		err := faissgo.WriteFlat(w, m, vecs.Dim(), vecs.Len(), func(data io.Writer) error {
			// The index's vector data is emb.memmap's bytes: convert each chunk once.
			if emb != nil {
				data = io.MultiWriter(data, emb)
			}
			var raw []byte
			return StreamRows(vecs, 0, log, func(_ int64, x []float32) error {
				return writeFloats(data, x, &raw)
			})
		})
		if err != nil {
			return err
		}
		return w.Flush()
	})
	if err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	return nil
}

// train trains idx on TrainSize rows drawn without replacement with cfg.Seed.
func train(cfg Config, vecs Vectors, idx Index) error {
	k := int64(cfg.TrainSize)
	if k <= 0 {
		k = defaultTrainSize
	}
	k = min(k, vecs.Len())
	fmt.Fprintf(cfg.Log, "needle build: training %s on %d sampled rows (seed %d)\n", cfg.Factory, k, cfg.Seed)
	x, err := Sample(vecs, k, cfg.Seed)
	if err != nil {
		return err
	}
	if err := idx.Train(x); err != nil {
		return fmt.Errorf("train %s: %w", cfg.Factory, err)
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
