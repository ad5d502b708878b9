package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrBusy is returned by Batcher.Search when the query queue is full; the server answers
// 503 with Retry-After, which the training stacks' clients retry.
var ErrBusy = errors.New("query queue is full, retry later")

// BatcherOptions bound the Batcher's batches and memory. Zero values take the defaults.
type BatcherOptions struct {
	// MaxBatch is the most queries in one encoder batch and one index search (default 64).
	MaxBatch int
	// MaxWait is how long a batch that is not full waits for more queries. The default 0
	// takes whatever is queued when the encoder is free: under load batches fill up while
	// the previous batch is being encoded, and a lone query is not delayed.
	MaxWait time.Duration
	// MaxQueued is the most queries admitted and not yet answered (default 16384). A
	// request that would pass it gets ErrBusy, unless the queue is empty.
	MaxQueued int
	// Encoders is the number of batches encoded at the same time (default 1; the encoder
	// itself may use several threads per batch).
	Encoders int
	// MaxSearchBatch is the most queries in one index search (default MaxBatch). Above
	// MaxBatch, the encoded batches waiting when a search starts are searched together: an
	// index whose search is a pass over all its rows (the mapped flat index) then serves a
	// 2,560-query request in a pass or two instead of one pass per encoder batch.
	MaxSearchBatch int
	// OnBatch, if set, is called with the query count of every encoder batch (metrics).
	// It runs on an encoder goroutine and must be cheap and thread-safe.
	OnBatch func(queries int)
}

func (o BatcherOptions) withDefaults() BatcherOptions {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 64
	}
	if o.MaxQueued <= 0 {
		o.MaxQueued = 16384
	}
	if o.Encoders <= 0 {
		o.Encoders = 1
	}
	o.MaxSearchBatch = max(o.MaxSearchBatch, o.MaxBatch)
	return o
}

// job is at most MaxBatch queries of one request. dist and labels are len(queries)*k
// windows of the request's caller-owned result buffers, written only by the search
// goroutine before it sends on done.
type job struct {
	ctx     context.Context
	queries []string
	k       int
	dist    []float32
	labels  []int64
	done    chan<- error
}

// batch is a group of jobs encoded together. Identical texts are encoded and searched
// once: vecs holds n*dim floats of n distinct texts, and rows[i] is the row of vecs that
// answers the i-th query of the jobs in order. k is the largest k of its jobs.
type batch struct {
	jobs []*job
	rows []int
	vecs []float32
	n, k int
	err  error
}

// Batcher coalesces the queries of concurrent Search calls into encoder batches of at most
// MaxBatch queries and runs one index search per batch. Encoding (one or more goroutines)
// and searching (one goroutine) form a pipeline, so a large request split into many
// batches keeps both busy. Memory is bounded by MaxQueued queries. Safe for concurrent use.
type Batcher struct {
	enc    Encoder
	idx    Index
	prefix string
	opt    BatcherOptions

	in      chan *job
	encoded chan *batch
	queued  atomic.Int64 // queries admitted and not yet answered
	dropped atomic.Int64 // queries not encoded (or stopped part way), or not searched, because their requests' contexts ended first
	stopped chan struct{}
}

// NewBatcher starts the encoder and search goroutines; Close stops them.
func NewBatcher(enc Encoder, idx Index, prefix string, opt BatcherOptions) *Batcher {
	opt = opt.withDefaults()
	b := &Batcher{
		enc: enc, idx: idx, prefix: prefix, opt: opt,
		// Every queued job holds at least one query, so MaxQueued+1 slots never block
		// an admitted request for long (a lone oversized request adds at most its chunks).
		in:      make(chan *job, opt.MaxQueued+1),
		encoded: make(chan *batch, max(1, opt.MaxSearchBatch/opt.MaxBatch)), // a search's worth may wait
		stopped: make(chan struct{}),
	}
	var encoders sync.WaitGroup
	for range opt.Encoders {
		encoders.Add(1)
		go func() {
			defer encoders.Done()
			b.encodeLoop()
		}()
	}
	go func() {
		encoders.Wait()
		close(b.encoded)
	}()
	go b.searchLoop()
	return b
}

// Queued is the number of queries admitted and not yet answered (the queue depth).
func (b *Batcher) Queued() int64 { return b.queued.Load() }

// Dropped counts the queries never encoded because their request's context ended before
// their batch was formed (a client that went away), those of batches whose encoding or
// search stopped part way because every request in them ended (ContextEncoder,
// ContextIndex), and those of encoded batches not searched because every request in them
// ended while they waited.
func (b *Batcher) Dropped() int64 { return b.dropped.Load() }

// Close stops the goroutines after the queued work is done. No Search may start after
// Close is called (the server stops accepting requests first).
func (b *Batcher) Close() {
	close(b.in)
	<-b.stopped
}

// Search encodes queries, searches the index for the k best rows of each and writes
// len(queries)*k scores and row labels into dist and labels (caller-owned, best first per
// query; label -1 = no hit). It returns ErrBusy when the queue is full, the encoder's or
// index's error, or ctx's error when ctx ended before the work started. Search always
// waits until no goroutine writes into dist and labels any more.
func (b *Batcher) Search(ctx context.Context, queries []string, k int, dist []float32, labels []int64) error {
	n := len(queries)
	if n == 0 {
		return nil
	}
	if k <= 0 || len(dist) < n*k || len(labels) < n*k {
		return errors.New("engine: Search needs k > 0 and result buffers of len(queries)*k")
	}
	if q := b.queued.Add(int64(n)); q > int64(b.opt.MaxQueued) && q != int64(n) {
		b.queued.Add(-int64(n))
		return ErrBusy
	}
	chunks := (n + b.opt.MaxBatch - 1) / b.opt.MaxBatch
	done := make(chan error, chunks)
	for lo := 0; lo < n; lo += b.opt.MaxBatch {
		hi := min(lo+b.opt.MaxBatch, n)
		b.in <- &job{ctx: ctx, queries: queries[lo:hi], k: k,
			dist: dist[lo*k : hi*k], labels: labels[lo*k : hi*k], done: done}
	}
	var first error
	for range chunks {
		if err := <-done; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// finish answers j and releases its queries from the queue count.
func (b *Batcher) finish(j *job, err error) {
	b.queued.Add(-int64(len(j.queries)))
	j.done <- err
}

// encodeLoop gathers queued jobs into batches, encodes them and hands them to searchLoop.
func (b *Batcher) encodeLoop() {
	var pending *job // a job that did not fit into the previous batch
	var texts []string
	rowOf := map[string]int{} // distinct text -> its row in the batch being built
	for {
		first := pending
		pending = nil
		if first == nil {
			j, ok := <-b.in
			if !ok {
				return
			}
			first = j
		}
		jobs, open := b.gather(first, &pending)
		bt := &batch{}
		texts = texts[:0]
		clear(rowOf)
		for _, j := range jobs {
			if err := j.ctx.Err(); err != nil {
				b.dropped.Add(int64(len(j.queries)))
				b.finish(j, err)
				continue
			}
			bt.jobs = append(bt.jobs, j)
			for _, text := range j.queries {
				row, ok := rowOf[text]
				if !ok {
					row = len(texts)
					rowOf[text] = row
					texts = append(texts, text)
				}
				bt.rows = append(bt.rows, row)
			}
			bt.k = max(bt.k, j.k)
		}
		if bt.n = len(texts); bt.n > 0 {
			if b.opt.OnBatch != nil {
				b.opt.OnBatch(bt.n)
			}
			bt.vecs, bt.err = b.encode(bt.jobs, texts)
			b.encoded <- bt
		}
		if !open {
			return
		}
	}
}

// encode encodes the distinct texts of a batch of jobs. With a ContextEncoder the encoding
// stops part way once every job's context has ended (their clients went away: no one waits for
// the vectors), and those queries count as dropped.
func (b *Batcher) encode(jobs []*job, texts []string) ([]float32, error) {
	ce, ok := b.enc.(ContextEncoder)
	if !ok {
		return b.enc.Encode(texts, b.prefix)
	}
	ctx, release := untilAbandoned(jobs)
	defer release()
	vecs, err := ce.EncodeContext(ctx, texts, b.prefix)
	if err != nil && ctx.Err() != nil {
		b.drop(jobs)
	}
	return vecs, err
}

// search runs bt's index search into dist and labels. With a ContextIndex the search stops
// part way once every job's context has ended, and those queries count as dropped.
func (b *Batcher) search(bt *batch, dist []float32, labels []int64) error {
	ci, ok := b.idx.(ContextIndex)
	if !ok {
		return b.idx.Search(bt.vecs, bt.k, dist, labels)
	}
	ctx, release := untilAbandoned(bt.jobs)
	defer release()
	err := ci.SearchContext(ctx, bt.vecs, bt.k, dist, labels)
	if err != nil && ctx.Err() != nil {
		b.drop(bt.jobs)
	}
	return err
}

// untilAbandoned returns a context that ends once every job's context has ended (no one
// waits for the work any more), and the function that releases it.
func untilAbandoned(jobs []*job) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var live atomic.Int64
	live.Store(int64(len(jobs)))
	stops := make([]func() bool, len(jobs))
	for i, j := range jobs {
		stops[i] = context.AfterFunc(j.ctx, func() {
			if live.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// drop counts the queries of jobs as dropped.
func (b *Batcher) drop(jobs []*job) {
	for _, j := range jobs {
		b.dropped.Add(int64(len(j.queries)))
	}
}

// gather returns first plus the queued jobs that fit into one batch, waiting at most
// MaxWait for more. A job that does not fit is left in *pending. open is false when the
// input channel was closed.
func (b *Batcher) gather(first *job, pending **job) (jobs []*job, open bool) {
	jobs = []*job{first}
	n := len(first.queries)
	var timeout <-chan time.Time
	if b.opt.MaxWait > 0 {
		t := time.NewTimer(b.opt.MaxWait)
		defer t.Stop()
		timeout = t.C
	}
	for n < b.opt.MaxBatch {
		var j *job
		var ok bool
		if timeout == nil {
			select {
			case j, ok = <-b.in:
			default:
				return jobs, true
			}
		} else {
			select {
			case j, ok = <-b.in:
			case <-timeout:
				return jobs, true
			}
		}
		if !ok {
			return jobs, false
		}
		if n+len(j.queries) > b.opt.MaxBatch {
			*pending = j
			return jobs, true
		}
		jobs = append(jobs, j)
		n += len(j.queries)
	}
	return jobs, true
}

// coalesce appends to bt the encoded batches already waiting, up to MaxSearchBatch queries
// (k becomes the largest k). A batch that failed to encode or does not fit is returned as
// next, for the next search.
func (b *Batcher) coalesce(bt *batch) (merged, next *batch) {
	if bt.err != nil {
		return bt, nil
	}
	for bt.n < b.opt.MaxSearchBatch {
		var more *batch
		select {
		case more = <-b.encoded:
		default:
		}
		if more == nil {
			return bt, nil
		}
		if more.err != nil || bt.n+more.n > b.opt.MaxSearchBatch {
			return bt, more
		}
		rows := bt.rows[:len(bt.rows):len(bt.rows)]
		for _, r := range more.rows { // more's vectors follow bt's
			rows = append(rows, bt.n+r)
		}
		bt = &batch{jobs: append(bt.jobs[:len(bt.jobs):len(bt.jobs)], more.jobs...), rows: rows,
			vecs: append(bt.vecs[:len(bt.vecs):len(bt.vecs)], more.vecs...), n: bt.n + more.n, k: max(bt.k, more.k)}
	}
	return bt, nil
}

// abandoned returns the first job's context error when every job's context has ended (their
// clients went away while the batch waited for the index): the search is skipped, and its
// queries count as dropped. A search is one pass over a mapped flat index (minutes on
// wiki-18), or the time the next live request waits behind it.
func (b *Batcher) abandoned(jobs []*job) error {
	for _, j := range jobs {
		if j.ctx.Err() == nil {
			return nil
		}
	}
	b.drop(jobs)
	return jobs[0].ctx.Err()
}

// searchLoop runs one index search per encoded batch (or per group of them, see coalesce) and
// copies each job's k best hits into its request's buffers. It owns dist and labels, reused across batches.
func (b *Batcher) searchLoop() {
	defer close(b.stopped)
	var dist []float32
	var labels []int64
	var next *batch // an encoded batch that did not fit into the previous search
	for {
		bt := next
		if bt == nil {
			var ok bool
			if bt, ok = <-b.encoded; !ok {
				return
			}
		}
		bt, next = b.coalesce(bt)
		err := bt.err
		if err == nil {
			err = b.abandoned(bt.jobs)
		}
		if err == nil && len(bt.vecs) != bt.n*b.idx.Dim() {
			err = errors.New("engine: encoder returned a wrong number of floats")
		}
		if err == nil {
			need := bt.n * bt.k
			if cap(dist) < need {
				dist, labels = make([]float32, need), make([]int64, need)
			}
			dist, labels = dist[:need], labels[:need]
			err = b.search(bt, dist, labels)
		}
		row := 0
		for _, j := range bt.jobs {
			if err == nil {
				for q := range j.queries {
					src := bt.rows[row+q] * bt.k
					copy(j.dist[q*j.k:(q+1)*j.k], dist[src:src+j.k])
					copy(j.labels[q*j.k:(q+1)*j.k], labels[src:src+j.k])
				}
			}
			row += len(j.queries)
			b.finish(j, err)
		}
	}
}
