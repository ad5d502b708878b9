package indexbuild

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"needle/index/bm25"
	"needle/index/indexdir"

	"needle/docstore"
	"needle/encoder/bert"
	"needle/faissgo"
	"needle/index/milvusindex"
	"needle/internal/progress"
)

// Job is one `needle build`: the corpus (with its offsets sidecar in Config.Out), the passage
// encoder (unless Config.Embeddings gives the vectors), and what the vectors go into: a FAISS
// index folder, or a Milvus collection when Milvus.URI is set; or, with BM25, the corpus's
// BM25 index (no encoder). Its Specs (options.go) declare `needle build`'s flags. Progress and
// the summary go to Config.Log.
type Job struct {
	Config
	// Encoder are the passage encoder's options (MaxLength and Pooling come from Config).
	Encoder bert.Options
	// LoadEncoder opens the encoder (on a GPU or the CPU, as the command's --gpu says).
	LoadEncoder func(dir string, opt bert.Options, log io.Writer) (*bert.Encoder, error)
	// Milvus, when its URI is set, receives the vectors instead of a FAISS index.
	Milvus milvusindex.BuildOptions
	// BM25 builds a BM25 index (index/bm25) into Config.Out instead, holding BM25MemoryBytes
	// of postings in memory.
	BM25            bool
	BM25MemoryBytes int64
}

// Run runs the job: a no-op when Config.Out holds a finished build of these arguments.
func (j Job) Run() error {
	if err := j.Check(); err != nil {
		return err
	}
	metric, _ := faissgo.ParseMetric(j.Metric) // checked
	j.Metric = map[faissgo.Metric]string{faissgo.IP: "ip", faissgo.L2: "l2"}[metric]
	switch {
	case j.BM25:
		return bm25.Build(bm25.BuildConfig{Corpus: j.Corpus, Out: j.Out, MemoryBytes: j.BM25MemoryBytes, Threads: j.Encoder.Threads,
			Restart: j.Restart, Version: j.Version, Log: j.Log})
	case j.Milvus.URI != "":
		return j.runMilvus()
	}
	if done, err := UpToDate(j.Config); err != nil {
		return err
	} else if done != nil {
		fmt.Fprintf(j.Log, "needle build: %s is up to date (%d rows, %s, built from these arguments); nothing to do\n",
			j.Out, done.Count, done.Factory)
		return nil
	}
	began := time.Now()
	parts, closeParts, err := j.parts()
	if err != nil {
		return err
	}
	defer closeParts()
	faissgo.Init(j.Encoder.Threads)
	parts.NewIndex = func(dim int) (Index, error) { return faissgo.New(dim, j.Factory, metric) }
	rep, err := Run(j.Config, parts)
	if err != nil {
		return err
	}
	total := time.Since(began)
	fmt.Fprintf(j.Log, "needle build: done in %s: %d rows (%d bad, indexed as empty text), index %s = %.1f MiB\n",
		progress.Duration(total), rep.Rows, rep.BadRows, j.Out+"/"+indexdir.IndexFileName, float64(rep.IndexBytes)/(1<<20))
	j.logEncoded(rep, total)
	if resumed := rep.Rows - rep.Encoded; resumed > 0 && j.Embeddings == "" {
		fmt.Fprintf(j.Log, "needle build: %d rows came from the shards of an earlier run\n", resumed)
	}
	return nil
}

// runMilvus is `needle build --milvus`: the corpus's vectors (encoded through the resumable
// shards in Config.Out, or read from Config.Embeddings: a memmap, .npy or FAISS flat index)
// are inserted into a Milvus collection, which Milvus then indexes. Both halves resume: the
// shards after the last finished one, the collection after the rows it holds.
func (j Job) runMilvus() error {
	began := time.Now()
	parts, closeParts, err := j.parts()
	if err != nil {
		return err
	}
	defer closeParts()
	vecs, rep, closeVecs, err := Embed(j.Config, parts)
	if err != nil {
		return err
	}
	defer closeVecs()
	opt := j.Milvus
	opt.Metric, opt.Restart, opt.Log = j.Config.Metric, j.Restart, j.Log
	mrep, err := milvusindex.Build(opt, vecs)
	if err != nil {
		return err
	}
	inserted := mrep.Rows - mrep.Resumed
	fmt.Fprintf(j.Log, "needle build: done in %s: milvus collection %q at %s holds %d rows (%d bad, indexed as empty text), %s index\n",
		progress.Duration(time.Since(began)), opt.Collection, opt.URI, mrep.Rows, rep.BadRows, opt.IndexType)
	fmt.Fprintf(j.Log, "needle build: inserted %d rows in %s = %.0f rows/s (%d came from an earlier run); flush and index %s\n",
		inserted, progress.Duration(mrep.InsertTime), float64(inserted)/max(mrep.InsertTime.Seconds(), 1e-9), mrep.Resumed,
		progress.Duration(mrep.IndexTime))
	j.logEncoded(rep, 0)
	return nil
}

// logEncoded prints the encoding rate (and end to end, when total is known).
func (j Job) logEncoded(rep *Report, total time.Duration) {
	if rep.Encoded == 0 {
		return
	}
	rate := float64(rep.Encoded) / rep.EncodeTime.Seconds()
	if total == 0 {
		fmt.Fprintf(j.Log, "needle build: encoded %d passages in %s = %.1f passages/s\n", rep.Encoded, progress.Duration(rep.EncodeTime), rate)
		return
	}
	fmt.Fprintf(j.Log, "needle build: encoded %d passages in %s = %.1f passages/s (%.1f passages/s end to end)\n",
		rep.Encoded, progress.Duration(rep.EncodeTime), rate, float64(rep.Encoded)/total.Seconds())
}

// parts opens the corpus and (unless Config.Embeddings gives the vectors) the encoder, whose
// precision and pooling the manifest records; close releases both.
func (j *Job) parts() (Parts, func(), error) {
	corpus, err := OpenCorpus(j.Corpus, j.Out, j.Log)
	if err != nil {
		return Parts{}, nil, err
	}
	parts := Parts{Corpus: corpusPassages{corpus}}
	if j.Embeddings != "" {
		return parts, func() { corpus.Close() }, nil
	}
	opt := j.Encoder
	opt.MaxLength, opt.Pooling = j.MaxLength, j.Pooling
	enc, err := j.LoadEncoder(j.Model, opt, j.Log)
	if err != nil {
		corpus.Close()
		return Parts{}, nil, err
	}
	j.Precision = string(enc.Options().Precision)
	parts.Pooling, parts.Encoder = enc.Options().Pooling, enc
	return parts, func() { enc.Close(); corpus.Close() }, nil
}

// OpenCorpus opens the corpus with its offsets sidecar in the folder out, created if need be
// ("": the docstore's default place), built on first use with a progress bar on log (a full
// scan of the file).
func OpenCorpus(path, out string, log io.Writer) (*docstore.Corpus, error) {
	if out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return nil, fmt.Errorf("output folder: %w", err)
		}
	}
	var bar *progress.Bar
	c, err := docstore.OpenCorpus(path, docstore.Options{SidecarDir: out, Progress: func(done, total int64) {
		if bar == nil {
			bar = progress.Start(log, progress.Options{Label: "corpus bytes indexed", Total: total})
		}
		bar.Set(done)
	}})
	if bar != nil {
		bar.Finish()
	}
	return c, err
}

// corpusPassages adapts docstore.Corpus to Corpus: a bad line is reported with its reason,
// not as an error, so it keeps its row.
type corpusPassages struct{ c *docstore.Corpus }

func (p corpusPassages) Len() int64 { return p.c.Len() }

func (p corpusPassages) Passage(i int64) (string, string, error) {
	s, err := p.c.Contents(i)
	var bad *docstore.BadRowError
	if errors.As(err, &bad) {
		return "", bad.Reason, nil
	}
	return s, "", err
}
