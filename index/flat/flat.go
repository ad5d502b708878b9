// Package flat is the memory-mapped flat index of `needle serve`: it serves a FAISS
// IndexFlatIP/IndexFlatL2 file (the anchors' e5_Flat.index, 64.6 GB for wiki-18) by mapping
// the file's vectors in place instead of loading them, so it is ready in the time it takes to
// check the header, and its anonymous memory does not grow with the index (one stripe of
// scores per search). Each Search is one exact pass over the rows for the whole batch of
// queries (kernels/search/flatscan: batch-invariant dot products over row blocks on all
// threads plus a heap per query), with FAISS's tie order and its scores to a few ulps.
// Searches may run at the same time, each with its own scratch: the server's bulk pass (a
// 2,560-query request) pauses between stripes at the gate in its context (internal/gate) while
// a single query's pass runs.
//
// The file must not be rewritten in place while served (replace it by rename): a mapping of
// a file truncated under it faults inside the scan. Search checks the file's size first.
package flat

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"

	"needle/faissgo"
	"needle/internal/gate"
	"needle/internal/mapfile"
	"needle/internal/pagecache"
	"needle/kernels/search/flatscan"
	"needle/platform/cpu"
)

// Index is a flat index file mapped read-only. Safe for concurrent use (searches run side by
// side, each a pass of its own).
type Index struct {
	path    string
	f       *os.File
	data    []byte // the whole file, mapped
	vec     faissgo.FlatVectors
	threads int
	// dropBehind: the file is larger than half the machine's memory (pagecache.TooLarge),
	// so a pass cannot keep it cached; it is read in windows of windowBytes, each dropped
	// from the page cache once scanned while the next one is read ahead.
	dropBehind bool

	mu     sync.RWMutex    // searches hold it shared, Close exclusive (it unmaps data)
	scan   flatscan.Search // the settings each search's scan copies
	idleMu sync.Mutex
	idle   []*flatscan.Search // scans not in use, each with its scratch (as many as searches ran at once)
}

// Open checks the flat index file at path (faissgo.StatFlat) and maps it. threads is the
// number of threads a search runs on (<= 0: one per core).
func Open(path string, threads int) (*Index, error) {
	vec, err := faissgo.StatFlat(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	size := vec.Offset + 4*vec.Ntotal*int64(vec.Dim)
	if st, err := f.Stat(); err != nil || st.Size() != size {
		f.Close()
		return nil, fmt.Errorf("%s changed while it was opened (replace index files by rename, never in place)", path)
	}
	data, err := mapfile.File(f, size, false, false)
	if err != nil {
		f.Close()
		return nil, err
	}
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	level, err := cpu.Selected()
	if err != nil {
		unix.Munmap(data)
		f.Close()
		return nil, err
	}
	x := &Index{path: path, f: f, data: data, vec: vec, threads: threads, dropBehind: pagecache.TooLarge(size)}
	x.scan = flatscan.Search{Level: level, Metric: flatscan.Metric(vec.Metric), Dim: vec.Dim, Threads: threads}
	return x, nil
}

func (x *Index) Dim() int               { return x.vec.Dim }
func (x *Index) Ntotal() int64          { return x.vec.Ntotal }
func (x *Index) Metric() faissgo.Metric { return x.vec.Metric }

// Search finds the k best rows of each query (len(q)/Dim queries) in one pass over the
// file, into dist and labels (nq x k each), best first, as FAISS's IndexFlat search does; a
// label of -1 means fewer than k rows.
func (x *Index) Search(q []float32, k int, dist []float32, labels []int64) error {
	return x.SearchContext(context.Background(), q, k, dist, labels)
}

// SearchContext is Search that gives up between stripes (flatscan.StripeRows: a few ms of
// dot products each, 5,120 rows for 64 queries of 384 floats) once ctx ends, returning ctx's error
// (engine.ContextIndex: the server's batcher stops a search whose clients all went away), and
// that waits before each stripe at the gate ctx may carry (internal/gate: bulk work gives way
// to a single query's search).
func (x *Index) SearchContext(ctx context.Context, q []float32, k int, dist []float32, labels []int64) error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.data == nil {
		return errors.New("flat: search on a closed index")
	}
	if st, err := x.f.Stat(); err != nil || st.Size() != int64(len(x.data)) {
		return fmt.Errorf("flat: %s changed size while served (replace index files by rename, never in place)", x.path)
	}
	s := x.takeScan()
	defer x.putScan(s)
	if err := s.Start(q, k, dist, labels); err != nil {
		return err
	}
	rowBytes := int64(4 * x.vec.Dim)
	at := func(row int64) int64 { return x.vec.Offset + row*rowBytes }
	stripe := int64(flatscan.StripeRows(len(q)/x.vec.Dim, x.vec.Dim))
	window := max(1, windowBytes/rowBytes/stripe) * stripe
	for w0 := int64(0); w0 < x.vec.Ntotal; w0 += window {
		wEnd := min(w0+window, x.vec.Ntotal)
		if x.dropBehind {
			x.advise(at(wEnd), at(wEnd+window), unix.MADV_WILLNEED)
		}
		for r0 := w0; r0 < wEnd; r0 += stripe {
			if err := gate.Wait(ctx); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := s.Scan(x.data[at(r0):at(min(r0+stripe, wEnd))], r0); err != nil {
				return err
			}
		}
		if x.dropBehind {
			x.advise(at(w0), at(wEnd), unix.MADV_DONTNEED) // out of this process's RSS ...
			pagecache.Drop(x.f, at(w0), at(wEnd)-at(w0))   // ... and of the page cache
		}
	}
	s.Finish()
	return nil
}

// takeScan returns an idle scan, or a new one.
func (x *Index) takeScan() *flatscan.Search {
	x.idleMu.Lock()
	defer x.idleMu.Unlock()
	if n := len(x.idle); n > 0 {
		s := x.idle[n-1]
		x.idle = x.idle[:n-1]
		return s
	}
	s := x.scan
	return &s
}

// putScan keeps s, with its scratch, for the next search.
func (x *Index) putScan(s *flatscan.Search) {
	x.idleMu.Lock()
	defer x.idleMu.Unlock()
	x.idle = append(x.idle, s)
}

// windowBytes is how much of a file too large for the page cache is read ahead, then
// dropped, at a time: large reads for the disk, whatever the stripes of the scan.
const windowBytes = 128 << 20

// advise applies madvise advice to the pages of data[from:to] (rounded inward to pages for
// DONTNEED, outward otherwise); advice only, so failure is ignored.
func (x *Index) advise(from, to int64, advice int) {
	page := int64(os.Getpagesize())
	to = min(to, int64(len(x.data)))
	if advice == unix.MADV_DONTNEED {
		from, to = (from+page-1)/page*page, to/page*page
	} else {
		from, to = from/page*page, (to+page-1)/page*page
		to = min(to, int64(len(x.data)))
	}
	if to > from {
		_ = unix.Madvise(x.data[from:to], advice)
	}
}

// Close unmaps the file; no Search may be running or start after it.
func (x *Index) Close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.data != nil {
		unix.Munmap(x.data)
		x.f.Close()
		x.data = nil
	}
}
