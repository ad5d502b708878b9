package compact

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"needle/faissgo"
	"needle/internal/byteview"
	"needle/internal/gate"
	"needle/internal/option"
	"needle/kernels/search/flatscan"
	"needle/platform/cpu"
)

// Options say how a form is served (`needle serve` flags).
type Options struct {
	Threads int  // FAISS and re-scoring threads (<= 0: one per core)
	Mmap    bool // map index.faiss's IVF lists instead of loading them (FAISS's mmap)
	Rescore int  // candidates re-scored per query (0: the form's; < 0: none)
	Nprobe  int  // IVF lists visited per query (0: the form's)
}

const (
	// rescoreBatch is the most queries searched at a time, one unit of a search that pauses
	// (SearchContext): a single query waits for at most one unit of a bulk search, and the
	// gathered rows are bounded (rescoreBatch x Rescore x Dim floats: 9.8 MB at 16 x 200 x 768).
	// 64-query units kept the singles' p99 during a slow POST at 144 ms, 16 brought it to 47
	// (docs/measurements/2026-11-27-compact-pauses.md).
	rescoreBatch = 16
	// readers is the number of row reads in flight while gathering candidates: random
	// reads of one row from a file that does not fit in RAM are disk reads, and this
	// machine's disk does 16k random 4 KiB reads/s one at a time, 40k with 16+ in flight.
	readers = 64
)

// Index serves a compact form: FAISS searches the codes for candidates and, with re-scoring,
// the candidates are re-scored exactly from the source's fp32 rows. Safe for concurrent use
// (re-scoring searches run one at a time).
type Index struct {
	form    *Form
	codes   *faissgo.Index
	src     *os.File // the source, for re-scoring (nil without)
	rescore int
	threads int

	mu   sync.Mutex // guards the scratch below (and src's closing), held by one unit of a search
	scan flatscan.Search
	cd   []float32
	cl   []int64
	rows []float32
}

// Open loads the form in dir: index.faiss into RAM (its IVF lists mapped with Mmap), and,
// when re-scoring, the source file, which must still be the one converted (size and mtime).
func Open(dir string, opt Options) (*Index, error) {
	form, err := ReadForm(dir)
	if err != nil {
		return nil, err
	}
	threads := opt.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	faissgo.Init(threads)
	codes, err := faissgo.Read(filepath.Join(dir, form.IndexFile), opt.Mmap)
	if err != nil {
		return nil, err
	}
	x := &Index{form: form, codes: codes, rescore: cmp.Or(opt.Rescore, form.Rescore), threads: threads}
	if err := x.open(opt); err != nil {
		x.Close()
		return nil, fmt.Errorf("compact form %s: %w", dir, err)
	}
	return x, nil
}

// open checks the codes against the form, sets nprobe and opens the source for re-scoring.
func (x *Index) open(opt Options) error {
	f := x.form
	if x.codes.Dim() != f.Dimension || x.codes.Ntotal() != f.Count {
		return fmt.Errorf("%s holds %d vectors of dimension %d, %s says %d of %d",
			f.IndexFile, x.codes.Ntotal(), x.codes.Dim(), FormName, f.Count, f.Dimension)
	}
	if nprobe := cmp.Or(opt.Nprobe, f.Nprobe); nprobe > 0 {
		if err := x.codes.SetSearchParam("nprobe", float64(nprobe)); err != nil {
			return err
		}
	}
	if x.rescore <= 0 {
		x.rescore = 0
		return nil
	}
	src, err := os.Open(f.Source.Path)
	if err != nil {
		return &option.Fix{Err: fmt.Errorf("re-scoring reads the source it was converted from: %w", err), Field: "Rescore", Does: "-1 serves without re-scoring"}
	}
	x.src = src
	st, err := src.Stat()
	if err != nil {
		return err
	}
	if st.Size() != f.Source.Size || st.ModTime().UnixNano() != f.Source.Mtime {
		return option.Fixf("Rescore", "-1 serves without re-scoring", "the source %s changed since the conversion (%d bytes, modified %v; converted: %d bytes, mtime %d): "+
			"re-scoring would read other vectors; convert it again",
			f.Source.Path, st.Size(), st.ModTime(), f.Source.Size, f.Source.Mtime)
	}
	if need := f.Source.Offset + 4*f.Count*int64(f.Dimension); st.Size() < need {
		return fmt.Errorf("the source %s is %d bytes, %d rows of dimension %d from byte %d need %d", f.Source.Path, st.Size(), f.Count, f.Dimension, f.Source.Offset, need)
	}
	// Re-scoring reads scattered rows: no readahead around them.
	_ = unix.Fadvise(int(src.Fd()), 0, 0, unix.FADV_RANDOM)
	m, _ := faissgo.ParseMetric(f.Metric)
	level, err := cpu.Selected()
	if err != nil {
		return err
	}
	x.scan = flatscan.Search{Level: level, Metric: flatscan.Metric(m), Dim: f.Dimension, Threads: x.threads}
	return nil
}

func (x *Index) Dim() int      { return x.form.Dimension }
func (x *Index) Ntotal() int64 { return x.form.Count }

// Form is the description the index was opened from.
func (x *Index) Form() Form { return *x.form }

// Rescore is the number of candidates re-scored per query (0: none).
func (x *Index) Rescore() int { return x.rescore }

// Search finds the k best rows of each query (len(q)/Dim queries) into dist and labels (nq x
// k, best first; label -1: no hit). With re-scoring, FAISS gives max(Rescore, k) candidates per
// query and the answer is their exact top k (scores and ties as the mapped flat index gives
// them over those rows); without, the codes' approximate scores.
func (x *Index) Search(q []float32, k int, dist []float32, labels []int64) error {
	return x.SearchContext(context.Background(), q, k, dist, labels)
}

// SearchContext is Search in units of at most rescoreBatch queries, each begun with
// gate.Wait(ctx) and a check of ctx: the server's bulk work pauses there for single queries
// (internal/gate), and a search whose clients all went away stops. A unit holds the re-scoring
// scratch only while it runs, so a single query's search runs between two units of a bulk one
// (each query's answer depends on that query alone: faissgo searches one query per call).
func (x *Index) SearchContext(ctx context.Context, q []float32, k int, dist []float32, labels []int64) error {
	d := x.form.Dimension
	nq := len(q) / d
	if len(q)%d != 0 || k <= 0 || len(dist) < nq*k || len(labels) < nq*k {
		return fmt.Errorf("compact: search of %d floats for dimension %d, k %d, into %d distances and %d labels", len(q), d, k, len(dist), len(labels))
	}
	for lo := 0; lo < nq; lo += rescoreBatch {
		if err := gate.Wait(ctx); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		hi := min(lo+rescoreBatch, nq)
		qs, ds, ls := q[lo*d:hi*d], dist[lo*k:hi*k], labels[lo*k:hi*k]
		var err error
		if x.rescore == 0 {
			err = x.codes.Search(qs, k, ds, ls)
		} else {
			err = x.rescoreBatch(qs, k, ds, ls)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// rescoreBatch answers up to rescoreBatch queries: candidates from the codes, their rows
// gathered from the source, exact scores and heaps in flatscan.
func (x *Index) rescoreBatch(q []float32, k int, dist []float32, labels []int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.src == nil {
		return errors.New("compact: search on a closed index")
	}
	d := x.form.Dimension
	nq, r := len(q)/d, max(x.rescore, k)
	// Scratch reused from batch to batch (slices.Grow keeps a large enough one).
	x.cd, x.cl = slices.Grow(x.cd[:0], nq*r)[:nq*r], slices.Grow(x.cl[:0], nq*r)[:nq*r]
	x.rows = slices.Grow(x.rows[:0], nq*r*d)[:nq*r*d]
	if err := x.codes.Search(q, r, x.cd, x.cl); err != nil {
		return err
	}
	for i := range nq {
		// In label order, the heaps take the candidates as a scan over them would.
		slices.Sort(x.cl[i*r : (i+1)*r])
	}
	if err := x.gather(x.cl, x.rows); err != nil {
		return err
	}
	if err := x.scan.Start(q, k, dist, labels); err != nil {
		return err
	}
	if err := x.scan.Rescore(x.rows, x.cl, r); err != nil {
		return err
	}
	x.scan.Finish()
	return nil
}

// gather reads the source row of each label into rows (Dim floats per label; labels of -1
// are skipped), readers reads in flight.
func (x *Index) gather(ids []int64, rows []float32) error {
	d := x.form.Dimension
	rowBytes := 4 * int64(d)
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range min(readers, len(ids)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for failed.Load() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(ids) {
					return
				}
				if ids[i] < 0 {
					continue
				}
				// The rows are little-endian float32s, as this machine's (x86-64) floats.
				dst := byteview.Float32s(rows[i*d : (i+1)*d])
				if _, err := x.src.ReadAt(dst, x.form.Source.Offset+ids[i]*rowBytes); err != nil {
					err = fmt.Errorf("compact: read row %d of the source %s: %w", ids[i], x.form.Source.Path, err)
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return *err
	}
	return nil
}

// Close frees the codes and closes the source; no Search may run or start after it.
func (x *Index) Close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.codes.Close()
	if x.src != nil {
		x.src.Close()
		x.src = nil
	}
}
