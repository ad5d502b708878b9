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

	"needle/engine/flatmap"
	"needle/faissgo"
)

// FlatOptions are the flags of `needle bench flat`.
type FlatOptions struct {
	Index   string // a flat index file (IndexFlatIP/L2), e.g. bench/wiki18_shape.py's flat.index
	Queries string // raw little-endian float32 query vectors, rows of the index's dimension
	GT      string // raw int64 exact ids, GTK per query, best first ("" = no recall)
	GTK     int    // ids per query in GT
	K       int    // results per query
	Batch   int    // queries per search: one pass over the file serves them all
	Batches int    // batches to time
	Threads int    // search threads (0 = all cores)
	Faiss   bool   // also load the file with FAISS (RAM = file size) and compare every answer
}

// FlatReport is what `needle bench flat` writes, as one JSON object.
type FlatReport struct {
	FileBytes    int64     `json:"file_bytes"`
	Rows         int64     `json:"rows"`
	Dim          int       `json:"dim"`
	ReadySeconds float64   `json:"ready_s"` // flatmap.Open: header check and mapping
	AnonKBOpen   int64     `json:"rss_anon_kb_after_open"`
	Batches      []float64 `json:"batch_s"` // wall seconds per batch (a full pass each)
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

// Flat times the mapped flat index on a file: time to ready, a pass per batch of queries,
// anonymous and file-backed memory, recall against exact ids, and with opt.Faiss the same
// searches through FAISS, answer for answer.
func Flat(w io.Writer, opt FlatOptions) error {
	if opt.Index == "" || opt.Queries == "" {
		return errors.New("--index and --queries are required (see --help)")
	}
	if opt.Batch <= 0 || opt.Batches <= 0 || opt.K <= 0 {
		return errors.New("--batch, --batches and --k must be > 0")
	}
	began := time.Now()
	x, err := flatmap.Open(opt.Index, opt.Threads)
	if err != nil {
		return err
	}
	defer x.Close()
	r := FlatReport{Rows: x.Ntotal(), Dim: x.Dim(), ReadySeconds: time.Since(began).Seconds(), AnonKBOpen: procStatusKB("RssAnon")}
	if st, err := os.Stat(opt.Index); err == nil {
		r.FileBytes = st.Size()
	}
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
		r.AnonKBMax, r.FileKBMax = max(r.AnonKBMax, procStatusKB("RssAnon")), max(r.FileKBMax, procStatusKB("RssFile"))
		fmt.Fprintf(os.Stderr, "batch %d: %d queries in %.1f s (RSS %s)\n", b, hi-lo, s.wall.Seconds(), readRSS())
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

// compareFaiss runs the same batches through FAISS's IndexFlat and counts the differences.
func compareFaiss(r *FlatReport, opt FlatOptions, q, dist []float32, labels []int64) error {
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
		return 0, errors.New("recall@10 needs --k and --gt-k of at least 10")
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
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}
