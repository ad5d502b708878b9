package bench

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"needle/engine"
	"needle/faissgo"
	"needle/internal/byteview"
	"needle/internal/option"
	"needle/internal/procstat"
)

// IndexOptions are the flags of `needle bench index`.
type IndexOptions struct {
	// Index is what `needle serve --index` takes: a flat index file (e.g. bench/wiki18_shape.py's
	// flat.index), a compact form folder (`needle convert`), any FAISS index file.
	Index   string
	Backend string // engine.Options.Backend ("": auto, as serve picks)
	Nprobe  int    // IVF lists visited (0: the form's or FAISS's default)
	Rescore int    // compact forms: candidates re-scored per query (0: the form's; < 0: none)
	Mmap    bool   // map IVF lists instead of loading them
	Queries string // raw little-endian float32 query vectors, rows of the index's dimension
	GT      string // raw int64 exact ids, GTK per query, best first ("" = no recall)
	GTK     int    // ids per query in GT
	K       int    // results per query
	Batch   int    // queries per search (serve's batcher searches up to --max-batch encoded queries at once)
	Batches int    // batches to time
	Threads int    // search threads (0 = all cores)
	Faiss   bool   // flat files: also load the file with FAISS (RAM = file size) and compare every answer
}

// Specs declares the options (`needle bench index`'s flags).
func (o *IndexOptions) Specs() option.Specs {
	return option.Specs{
		option.String(&o.Index, "Index", "index", "", "index file or compact form folder (required)"),
		option.String(&o.Backend, "Backend", "index-backend", "", "as serve's --index-backend (default auto)"),
		option.Num(&o.Nprobe, "Nprobe", "nprobe", 0, option.From(0), "IVF lists visited per query (0: the form's, else FAISS's default)"),
		option.Num(&o.Rescore, "Rescore", "rescore", 0, option.From(-1), "compact forms: candidates re-scored per query (0: the form's; -1: none)"),
		option.Bool(&o.Mmap, "Mmap", "mmap", false, "map IVF lists instead of loading them"),
		option.String(&o.Queries, "Queries", "queries", "", "raw little-endian float32 query vectors of the index dimension (required)"),
		option.String(&o.GT, "GT", "gt", "", "raw int64 exact ids, --gt-k per query, best first: reports recall@10"),
		option.Num(&o.GTK, "GTK", "gt-k", 100, option.Above(0), "ids per query in --gt"),
		option.Num(&o.K, "K", "k", 10, option.Above(0), "results per query"),
		option.Num(&o.Batch, "Batch", "batch", 64, option.Above(0), "queries per search (serve searches up to --max-batch encoded queries at once)"),
		option.Num(&o.Batches, "Batches", "batches", 2, option.Above(0), "batches to time"),
		option.Num(&o.Threads, "Threads", "threads", 0, option.From(0), "search threads (0 = all cores)"),
		option.Bool(&o.Faiss, "Faiss", "faiss", false, "flat files: also search with FAISS (loads the file into RAM) and compare every answer"),
	}
}

// IndexReport is what `needle bench index` writes, as one JSON object.
type IndexReport struct {
	Backend      string    `json:"backend"`
	IndexBytes   int64     `json:"index_bytes"` // the index file, or every file of a form folder (not its source)
	Rows         int64     `json:"rows"`
	Dim          int       `json:"dim"`
	ReadySeconds float64   `json:"ready_s"` // opening the index as serve does
	AnonKBOpen   int64     `json:"rss_anon_kb_after_open"`
	FileKBOpen   int64     `json:"rss_file_kb_after_open"`
	Batches      []float64 `json:"batch_s"` // wall seconds per batch
	BatchCPU     []float64 `json:"batch_cpu_s"`
	QPS          float64   `json:"qps"` // all batches' queries / their total wall time
	AnonKBMax    int64     `json:"rss_anon_kb_max"`
	FileKBMax    int64     `json:"rss_file_kb_max"`
	RecallAt10   float64   `json:"recall_at_10,omitempty"` // |top 10 ∩ exact top 10| / 10, mean
	// With --faiss: FAISS's IndexFlat search of the same file and queries.
	FaissLoadSeconds float64   `json:"faiss_load_s,omitempty"`
	FaissBatches     []float64 `json:"faiss_batch_s,omitempty"`
	FaissLabelDiffs  int       `json:"faiss_label_diffs"` // results whose id differs from FAISS's
	FaissMaxScoreDif float64   `json:"faiss_max_score_diff"`
}

// Index times an index opened as `needle serve` opens it (engine.OpenIndex): time to ready,
// each batch of queries, anonymous and file-backed memory, recall against exact ids, and with
// opt.Faiss (flat files) the same searches through FAISS, answer for answer.
func Index(w io.Writer, opt IndexOptions) error {
	if err := errors.Join(option.Required("Index", opt.Index), option.Required("Queries", opt.Queries), opt.Specs().Check()); err != nil {
		return err
	}
	began := time.Now()
	x, backend, closeIndex, err := engine.OpenIndex(engine.Options{Index: opt.Index, Backend: opt.Backend,
		Threads: opt.Threads, Mmap: opt.Mmap, Nprobe: opt.Nprobe, Rescore: opt.Rescore})
	if err != nil {
		return err
	}
	defer closeIndex()
	r := IndexReport{Backend: backend, Rows: x.Ntotal(), Dim: x.Dim(), ReadySeconds: time.Since(began).Seconds(),
		AnonKBOpen: procstat.KB("RssAnon"), FileKBOpen: procstat.KB("RssFile"), IndexBytes: diskBytes(opt.Index)}
	q, err := readFloats(opt.Queries, x.Dim())
	if err != nil {
		return err
	}
	nq := min(opt.Batch*opt.Batches, len(q)/x.Dim())
	dist, labels := make([]float32, nq*opt.K), make([]int64, nq*opt.K)
	for b := 0; b*opt.Batch < nq; b++ {
		lo, hi := b*opt.Batch, min((b+1)*opt.Batch, nq)
		s, err := measure(func() error {
			return x.Search(q[lo*x.Dim():hi*x.Dim()], opt.K, dist[lo*opt.K:hi*opt.K], labels[lo*opt.K:hi*opt.K])
		})
		if err != nil {
			return err
		}
		r.Batches, r.BatchCPU = append(r.Batches, s.wall.Seconds()), append(r.BatchCPU, s.cpu.Seconds())
		r.AnonKBMax, r.FileKBMax = max(r.AnonKBMax, procstat.KB("RssAnon")), max(r.FileKBMax, procstat.KB("RssFile"))
		fmt.Fprintf(os.Stderr, "batch %d: %d queries in %.3f s (RSS %s)\n", b, hi-lo, s.wall.Seconds(), readRSS())
	}
	var total float64
	for _, s := range r.Batches {
		total += s
	}
	r.QPS = float64(nq) / total
	if opt.GT != "" {
		if r.RecallAt10, err = recallAt10(opt.GT, opt.GTK, labels, opt.K, nq); err != nil {
			return err
		}
	}
	if opt.Faiss {
		if err := compareFaiss(&r, opt, q[:nq*x.Dim()], dist, labels); err != nil {
			return err
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// diskBytes is the size of the file at path, or of the files in the folder at path.
func diskBytes(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if !st.IsDir() {
		return st.Size()
	}
	var n int64
	entries, _ := os.ReadDir(path)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
	}
	return n
}

// compareFaiss runs the same batches through FAISS's IndexFlat and counts the differences.
func compareFaiss(r *IndexReport, opt IndexOptions, q, dist []float32, labels []int64) error {
	faissgo.Init(opt.Threads)
	began := time.Now()
	f, err := faissgo.Read(opt.Index, false)
	if err != nil {
		return err
	}
	defer f.Close()
	r.FaissLoadSeconds = time.Since(began).Seconds()
	nq, d := len(q)/r.Dim, r.Dim
	fd, fl := make([]float32, len(dist)), make([]int64, len(labels))
	for lo := 0; lo < nq; lo += opt.Batch {
		hi := min(lo+opt.Batch, nq)
		s, err := measure(func() error { return f.Search(q[lo*d:hi*d], opt.K, fd[lo*opt.K:hi*opt.K], fl[lo*opt.K:hi*opt.K]) })
		if err != nil {
			return err
		}
		r.FaissBatches = append(r.FaissBatches, s.wall.Seconds())
	}
	for i := range labels {
		if labels[i] != fl[i] {
			r.FaissLabelDiffs++
		}
		r.FaissMaxScoreDif = max(r.FaissMaxScoreDif, math.Abs(float64(dist[i]-fd[i])))
	}
	return nil
}

// recallAt10 is the mean share of each query's exact top 10 (the first 10 of gtk ids per
// query in file gt) among its first 10 labels.
func recallAt10(gt string, gtk int, labels []int64, k, nq int) (float64, error) {
	if gtk < 10 || k < 10 {
		return 0, fmt.Errorf("recall@10 needs K and GTK of at least 10: %w", errors.Join(option.Errorf("K", "%d", k), option.Errorf("GTK", "%d", gtk)))
	}
	b, err := os.ReadFile(gt)
	if err != nil {
		return 0, err
	}
	if len(b) < 8*gtk*nq {
		return 0, fmt.Errorf("%s: %d bytes, want at least %d x %d int64 ids", gt, len(b), nq, gtk)
	}
	var hits int
	for i := range nq {
		exact := map[int64]bool{}
		for j := range 10 {
			exact[int64(binary.LittleEndian.Uint64(b[8*(i*gtk+j):]))] = true
		}
		for _, l := range labels[i*k : i*k+10] {
			if exact[l] {
				hits++
			}
		}
	}
	return float64(hits) / float64(10*nq), nil
}

// readFloats reads a raw little-endian float32 file of rows of dim floats.
func readFloats(path string, dim int) ([]float32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 || len(b)%(4*dim) != 0 {
		return nil, fmt.Errorf("%s: %d bytes is not rows of %d float32s", path, len(b), dim)
	}
	v := make([]float32, len(b)/4)
	byteview.ReadFloat32s(v, b)
	return v, nil
}
