package compact

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"needle/faissgo"
	"needle/index/indexdir"
	"needle/internal/atomicfile"
	"needle/internal/option"
	"needle/internal/writer"
)

// Defaults of a conversion (`needle convert`), chosen by measurement on the full 21M-row
// wiki-18-shaped set (docs/measurements/2026-11-24-compact-form.md): OPQ keeps the fine score differences plain PQ
// loses, and 32 lists with 200 candidates re-scored gave recall@10 0.966 at 119 queries/s from a
// cold page cache, where 64 lists with 100 candidates gave 0.937 at 96.
const (
	DefaultFactory        = "OPQ64_256,IVF8192,PQ64np"
	DefaultTrainSize      = 327680 // 40 rows per IVF list at 8192 lists (FAISS warns under 39)
	DefaultRescore        = 200
	DefaultNprobe         = 32
	DefaultCheckpointRows = 2 << 20
)

// Config holds the arguments of one conversion.
type Config struct {
	From string // a FAISS flat index file, a headerless float32 memmap or a float32 .npy
	Dim  int    // the width of a memmap (0: a flat file's or .npy's own)
	// Metric is "ip" or "l2" for a memmap or .npy ("": ip); a flat file carries its own,
	// and Metric, when set, must agree with it.
	Metric    string
	Out       string // the form's folder
	Factory   string // FAISS index_factory string ("": DefaultFactory)
	TrainSize int64  // training sample rows, drawn with Seed (0: DefaultTrainSize; capped at the rows)
	Seed      int64
	// Rescore and Nprobe are the search defaults written into compact.json (serve flags
	// override them); they do not change index.faiss. Rescore < 0 turns re-scoring off.
	Rescore, Nprobe int
	// CheckpointRows is how often the index built so far is written to Out/partial, rounded
	// up to whole chunks (0: DefaultCheckpointRows): a killed conversion loses at most this.
	CheckpointRows int64
	Restart        bool // discard a partial or finished conversion of other arguments in Out
	Version        string
	Log            io.Writer // progress bar and notes (stderr); nil: discarded
}

// Report is what a conversion did.
type Report struct {
	UpToDate    bool  // Out already held this form; nothing was converted
	Rows        int64 // rows in the form
	ResumedFrom int64 // rows an earlier run had added (read back from its checkpoint)
	TrainTime   time.Duration
	AddTime     time.Duration // adding this run's rows, checkpoints included
	IndexBytes  int64
	Form        *Form
}

const partialDirName, argsName = "partial", "args.json"

// Convert streams cfg.From into the compact form cfg.Out. The source is read once, a chunk at
// a time (dropped from the page cache behind the reader when larger than half of RAM), never
// held; FAISS holds the codes. The index built so far is checkpointed to Out/partial every
// CheckpointRows rows; a rerun after a kill reads the last checkpoint and adds the rest in
// the same chunks, so index.faiss has the bytes of an uninterrupted run (the codes of a row
// depend only on the trained index and its chunk; not so for HNSW factories, whose FAISS
// inserts run in parallel). index.faiss then compact.json appear only when complete, each
// atomically; a full disk fails with FAISS's or the OS's message and leaves the last
// checkpoint, not a half-written form.
func Convert(cfg Config) (*Report, error) {
	cfg.Factory = cmp.Or(cfg.Factory, DefaultFactory)
	cfg.TrainSize = cmp.Or(cfg.TrainSize, DefaultTrainSize)
	cfg.CheckpointRows = cmp.Or(cfg.CheckpointRows, DefaultCheckpointRows)
	cfg.CheckpointRows = (cfg.CheckpointRows + indexdir.ChunkRows - 1) / indexdir.ChunkRows * indexdir.ChunkRows
	cfg.Log = writer.OrDiscard(cfg.Log)
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, fmt.Errorf("output folder: %w", err)
	}
	unlock, err := indexdir.LockDir(cfg.Out)
	if err != nil {
		return nil, err
	}
	defer unlock()
	partial := filepath.Join(cfg.Out, partialDirName)
	for _, dir := range []string{cfg.Out, partial} {
		if _, err := atomicfile.RemoveTemps(dir); err != nil {
			return nil, fmt.Errorf("remove the temp files of an interrupted conversion: %w", err)
		}
	}
	src, err := indexdir.OpenEmbeddings(cfg.From, cfg.Dim)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	a, err := sourceArgs(cfg, src)
	if err != nil {
		return nil, err
	}
	if rep, err := upToDate(cfg, a); rep != nil || err != nil {
		return rep, err
	}
	if err := startPartial(cfg, a, partial); err != nil {
		return nil, err
	}
	rep := &Report{Rows: a.Count}
	idx, err := resume(cfg, a, src, rep)
	if err != nil {
		return nil, err
	}
	defer idx.Close()
	began := time.Now()
	checkpoint := filepath.Join(partial, IndexFileName)
	err = indexdir.StreamRows(src, idx.Ntotal(), cfg.Log, func(start int64, x []float32) error {
		if err := idx.Add(x); err != nil {
			return fmt.Errorf("add rows from %d: %w", start, err)
		}
		if done := idx.Ntotal(); done%cfg.CheckpointRows == 0 && done < a.Count {
			if err := idx.WriteFile(checkpoint); err != nil {
				return fmt.Errorf("checkpoint at row %d: %w", done, err)
			}
			fmt.Fprintf(cfg.Log, "needle convert: checkpoint: %d rows in %s\n", done, checkpoint)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if idx.Ntotal() != a.Count {
		return nil, fmt.Errorf("the index holds %d rows after adding %d", idx.Ntotal(), a.Count)
	}
	if err := idx.WriteFile(filepath.Join(cfg.Out, IndexFileName)); err != nil {
		return nil, err
	}
	rep.AddTime = time.Since(began)
	return finish(cfg, a, rep)
}

// sourceArgs describes the conversion of src that cfg asks for.
func sourceArgs(cfg Config, src *indexdir.Embeddings) (args, error) {
	abs, err := filepath.Abs(src.Path())
	if err != nil {
		return args{}, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return args{}, err
	}
	metric := cmp.Or(src.Metric(), cfg.Metric, "ip")
	if cfg.Metric != "" && cfg.Metric != metric {
		return args{}, option.Errorf("Metric", "%s, but %s is a FAISS flat index of metric %s", cfg.Metric, cfg.From, metric)
	}
	if _, err := faissgo.ParseMetric(metric); err != nil {
		return args{}, option.Wrap("Metric", err)
	}
	if src.Len() == 0 {
		return args{}, fmt.Errorf("%s holds no vectors", cfg.From)
	}
	return args{
		Source:    Source{Path: abs, Size: st.Size(), Mtime: st.ModTime().UnixNano(), Offset: src.Offset()},
		Dimension: src.Dim(), Count: src.Len(), Metric: metric, Factory: cfg.Factory,
		TrainSize: min(cfg.TrainSize, src.Len()), Seed: cfg.Seed, ChunkRows: indexdir.ChunkRows,
	}, nil
}

// upToDate returns a report when Out already holds the form of a (after updating its search
// defaults to cfg's), nil when a conversion is needed. A form of other arguments is an error,
// or is removed with Restart.
func upToDate(cfg Config, a args) (*Report, error) {
	form, err := ReadForm(cfg.Out)
	if err != nil {
		return nil, nil
	}
	same := form.ArgsHash == a.hash()
	if _, err := os.Stat(filepath.Join(cfg.Out, form.IndexFile)); err == nil && same && !cfg.Restart {
		if rescore, nprobe := searchDefaults(cfg, a.Factory); form.Rescore != rescore || form.Nprobe != nprobe {
			form.Rescore, form.Nprobe = rescore, nprobe
			if err := writeForm(cfg.Out, form); err != nil {
				return nil, err
			}
		}
		return &Report{UpToDate: true, Rows: form.Count, Form: form}, nil
	}
	if !same && !cfg.Restart {
		return nil, option.Fixf("Restart", "replaces it", "%s holds a compact form of other arguments (source, factory, training)", cfg.Out)
	}
	// The form description goes first, so an interrupted removal never looks complete.
	for _, name := range []string{FormName, IndexFileName} {
		if err := os.Remove(filepath.Join(cfg.Out, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	return nil, atomicfile.SyncDir(cfg.Out)
}

// startPartial makes Out/partial hold a conversion of a: a partial conversion of other
// arguments there is an error, or is discarded with Restart (as is one of the same arguments).
func startPartial(cfg Config, a args, partial string) error {
	path := filepath.Join(partial, argsName)
	if data, err := os.ReadFile(path); err == nil {
		var old args
		if json.Unmarshal(data, &old) == nil && old == a && !cfg.Restart {
			return nil
		}
		if !cfg.Restart {
			return option.Fixf("Restart", "discards it", "%s holds a partial conversion of other arguments (%s)", partial, diffArgs(old, a))
		}
	}
	if err := os.RemoveAll(partial); err != nil {
		return err
	}
	if err := os.MkdirAll(partial, 0o755); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(a, "", "  ")
	return atomicfile.Write(path, append(data, '\n'))
}

// diffArgs names what differs between two conversions' arguments.
func diffArgs(old, now args) string {
	switch {
	case old.Source != now.Source:
		return fmt.Sprintf("source %+v, now %+v", old.Source, now.Source)
	case old.Factory != now.Factory:
		return fmt.Sprintf("factory %q, now %q", old.Factory, now.Factory)
	case old.TrainSize != now.TrainSize || old.Seed != now.Seed:
		return fmt.Sprintf("training sample %d rows with seed %d, now %d with seed %d", old.TrainSize, old.Seed, now.TrainSize, now.Seed)
	}
	return fmt.Sprintf("%+v, now %+v", old, now)
}

// resume returns the index to add to: the last checkpoint's (or a finished index.faiss left
// by a run killed before compact.json), else a new index trained on the seeded sample and
// checkpointed at once.
func resume(cfg Config, a args, src indexdir.Vectors, rep *Report) (*faissgo.Index, error) {
	for _, path := range []string{filepath.Join(cfg.Out, partialDirName, IndexFileName), filepath.Join(cfg.Out, IndexFileName)} {
		if _, err := os.Stat(path); err != nil {
			continue
		}
		idx, err := faissgo.Read(path, false)
		if err != nil {
			return nil, &option.Fix{Err: fmt.Errorf("resume from the checkpoint: %w", err), Field: "Restart", Does: "discards it"}
		}
		if n := idx.Ntotal(); idx.Dim() != a.Dimension || n > a.Count || (n%indexdir.ChunkRows != 0 && n != a.Count) {
			idx.Close()
			return nil, option.Fixf("Restart", "discards it", "checkpoint %s holds %d rows of dimension %d: not a checkpoint of this conversion", path, n, idx.Dim())
		}
		rep.ResumedFrom = idx.Ntotal()
		fmt.Fprintf(cfg.Log, "needle convert: resuming after %d rows (checkpoint %s)\n", rep.ResumedFrom, path)
		return idx, nil
	}
	m, _ := faissgo.ParseMetric(a.Metric)
	idx, err := faissgo.New(a.Dimension, a.Factory, m)
	if err != nil {
		return nil, err
	}
	if !idx.IsTrained() {
		began := time.Now()
		fmt.Fprintf(cfg.Log, "needle convert: training %s on %d sampled rows (seed %d)\n", a.Factory, a.TrainSize, a.Seed)
		x, err := indexdir.Sample(src, a.TrainSize, a.Seed)
		if err == nil {
			err = idx.Train(x)
		}
		if err != nil {
			idx.Close()
			return nil, fmt.Errorf("train %s: %w", a.Factory, err)
		}
		rep.TrainTime = time.Since(began)
	}
	if err := idx.WriteFile(filepath.Join(cfg.Out, partialDirName, IndexFileName)); err != nil {
		idx.Close()
		return nil, fmt.Errorf("checkpoint after training: %w", err)
	}
	return idx, nil
}

// finish writes compact.json after index.faiss and removes the partial folder.
func finish(cfg Config, a args, rep *Report) (*Report, error) {
	st, err := os.Stat(filepath.Join(cfg.Out, IndexFileName))
	if err != nil {
		return nil, err
	}
	rescore, nprobe := searchDefaults(cfg, a.Factory)
	form := &Form{
		Factory: a.Factory, IndexFile: IndexFileName, Dimension: a.Dimension, Count: a.Count, Metric: a.Metric,
		Source: a.Source, Rescore: rescore, Nprobe: nprobe, TrainSize: a.TrainSize, Seed: a.Seed,
		ArgsHash: a.hash(), NeedleVersion: cfg.Version,
	}
	if err := writeForm(cfg.Out, form); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(filepath.Join(cfg.Out, partialDirName)); err != nil {
		return nil, fmt.Errorf("remove the checkpoint: %w", err)
	}
	rep.IndexBytes, rep.Form = st.Size(), form
	return rep, nil
}

// searchDefaults are the Rescore and Nprobe cfg records in compact.json for an index made by
// factory (nprobe only for IVF indexes).
func searchDefaults(cfg Config, factory string) (rescore, nprobe int) {
	rescore = max(cmp.Or(cfg.Rescore, DefaultRescore), 0)
	if strings.Contains(factory, "IVF") {
		nprobe = cmp.Or(cfg.Nprobe, DefaultNprobe)
	}
	return rescore, nprobe
}
