package indexbuild

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
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

// addRows is how many rows assemble reads per step (bounds its memory).
const addRows = 16384

// assemble writes the index (and emb.memmap when asked) from vecs. Flat is streamed
// straight into FAISS's file format, so its memory stays at one chunk however large the
// index (wiki-18's 64.6 GB Flat index never has to fit in RAM); other factories are built
// in memory through FAISS (trained first on a seeded sample when they need it) and written
// by FAISS.
func assemble(cfg Config, vecs vectors, newIndex func(dim int) (Index, error)) error {
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
func streamRows(vecs vectors, log io.Writer, emb io.Writer, use func(start int64, x []float32) error) error {
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
// ("l2") file, byte for byte what faiss.write_index writes (faiss/impl/index_write.cpp:
// fourcc, then d i32, ntotal i64, two unused i64 of 1<<20, is_trained u8, metric i32, then
// the vector of ntotal*d floats as a u64 length and the data).
func writeFlatIndex(path, metric string, vecs vectors, log io.Writer, emb io.Writer) error {
	fourcc, metricType := "IxFI", uint32(0) // faiss METRIC_INNER_PRODUCT
	if metric == "l2" {
		fourcc, metricType = "IxF2", 1 // faiss METRIC_L2
	}
	head := []byte(fourcc)
	head = binary.LittleEndian.AppendUint32(head, uint32(vecs.Dim()))
	head = binary.LittleEndian.AppendUint64(head, uint64(vecs.Len()))
	head = binary.LittleEndian.AppendUint64(head, 1<<20)
	head = binary.LittleEndian.AppendUint64(head, 1<<20)
	head = append(head, 1)
	head = binary.LittleEndian.AppendUint32(head, metricType)
	head = binary.LittleEndian.AppendUint64(head, uint64(vecs.Len())*uint64(vecs.Dim()))
	err := atomicfile.Create(path, func(f *os.File) error {
		w := bufio.NewWriterSize(f, 4<<20)
		if _, err := w.Write(head); err != nil {
			return err
		}
		// The index's vector data is emb.memmap's bytes: convert each chunk once.
		out := io.Writer(w)
		if emb != nil {
			out = io.MultiWriter(w, emb)
		}
		var raw []byte
		err := streamRows(vecs, log, nil, func(_ int64, x []float32) error {
			return writeFloats(out, x, &raw)
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
