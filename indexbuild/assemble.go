package indexbuild

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"needle/index/indexdir"

	"needle/faissgo"
	"needle/internal/atomicfile"
)

// assemble writes the index (and emb.memmap when asked) from vecs. Flat is streamed
// straight into FAISS's file format, so its memory stays at one chunk however large the
// index (wiki-18's 64.6 GB Flat index never has to fit in RAM); other factories are built
// in memory through FAISS (trained first on a seeded sample when they need it) and written
// by FAISS.
func assemble(cfg Config, vecs indexdir.Vectors, newIndex func(dim int) (Index, error)) error {
	if cfg.Factory == "Flat" {
		return withEmbeddings(cfg, func(emb io.Writer) error {
			return writeFlatIndex(filepath.Join(cfg.Out, indexdir.IndexFileName), cfg.Metric, vecs, cfg.Log, emb)
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
		return indexdir.StreamRows(vecs, 0, cfg.Log, func(start int64, x []float32) error {
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
	if err := idx.WriteFile(filepath.Join(cfg.Out, indexdir.IndexFileName)); err != nil {
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
	return atomicfile.Create(filepath.Join(cfg.Out, indexdir.EmbeddingsFileName), func(f *os.File) error {
		w := bufio.NewWriterSize(f, 4<<20)
		if err := write(w); err != nil {
			return err
		}
		return w.Flush()
	})
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
func writeFlatIndex(path, metric string, vecs indexdir.Vectors, log io.Writer, emb io.Writer) error {
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
			return indexdir.StreamRows(vecs, 0, log, func(_ int64, x []float32) error {
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
func train(cfg Config, vecs indexdir.Vectors, idx Index) error {
	k := int64(cfg.TrainSize)
	if k <= 0 {
		k = defaultTrainSize
	}
	k = min(k, vecs.Len())
	fmt.Fprintf(cfg.Log, "needle build: training %s on %d sampled rows (seed %d)\n", cfg.Factory, k, cfg.Seed)
	x, err := indexdir.Sample(vecs, k, cfg.Seed)
	if err != nil {
		return err
	}
	if err := idx.Train(x); err != nil {
		return fmt.Errorf("train %s: %w", cfg.Factory, err)
	}
	return nil
}
