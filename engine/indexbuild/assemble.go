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

// addRows is how many rows assemble reads per step (bounds its memory).
const addRows = 16384

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
		return streamRows(vecs, cfg.Log, emb, func(start int64, x []float32) error {
			if err := idx.Add(x); err != nil {
				return fmt.Errorf("index add at row %d: %w", start, err)
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

// streamRows hands every row of vecs to use, addRows at a time, in order, also writing
// them as raw float32 to emb when it is not nil; a progress bar counts the rows.
func streamRows(vecs Vectors, log io.Writer, emb io.Writer, use func(start int64, x []float32) error) error {
	bar := progress.Start(log, progress.Options{Label: "rows indexed", Total: vecs.Len()})
	defer bar.Finish()
	dim := int64(vecs.Dim())
	buf := make([]float32, addRows*dim)
	var raw []byte
	for start := int64(0); start < vecs.Len(); start += addRows {
		x := buf[:min(addRows, vecs.Len()-start)*dim]
		if err := vecs.Read(start, x); err != nil {
			return err
		}
		if err := use(start, x); err != nil {
			return err
		}
		if emb != nil {
			if err := writeFloats(emb, x, &raw); err != nil {
				return err
			}
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
			return streamRows(vecs, log, nil, func(_ int64, x []float32) error {
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
