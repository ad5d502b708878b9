package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"needle/internal/gate"
)

// ErrBusy is returned by Batcher.Search when the query queue is full; the server answers
// 503 with Retry-After, which the training stacks' clients retry.
var ErrBusy = errors.New("query queue is full, retry later")

// BatcherOptions bound the Batcher's batches and memory; their Specs give the defaults
// (option.Defaults) and NewBatcher refuses what they do not take.
type BatcherOptions struct {
	// MaxBatch is the most queries in one encoder batch and one index search.
	MaxBatch int
	// MaxWait is how long a batch that is not full waits for more queries. The default 0
	// takes whatever is queued when the encoder is free: under load batches fill up while
	// the previous batch is being encoded, and a lone query is not delayed.
	MaxWait time.Duration
	// MaxQueued is the most queries admitted and not yet answered. A request that would pass
	// it gets ErrBusy, unless the queue is empty.
	MaxQueued int
	// Encoders is the number of batches encoded at the same time in each of the Batcher's two
	// lanes (the encoder itself may use several threads per batch).
	Encoders int
	// MaxSearchBatch is the most queries in one index search (default MaxBatch). Above
	// MaxBatch, the encoded batches waiting when a search starts are searched together: an
	// index whose search is a pass over all its rows (the mapped flat index) then serves a
	// 2,560-query request in a pass or two instead of one pass per encoder batch.
	MaxSearchBatch int
	// Clock times the lanes' work for their shares (internal/gate; nil: time.Now).
	Clock func() time.Time
	// OnBatch, if set, is called with the query count of every encoder batch (metrics).
	// It runs on an encoder goroutine and must be cheap and thread-safe.
	OnBatch func(queries int)
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
	held    bool // an interactive job: it holds the Batcher's gate from admission to finish
}

// request is the jobs of one Search call not yet taken into a batch, in query order.
type request struct{ jobs []*job }

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
// MaxBatch queries and runs one index search per batch (or per group of batches, see
// MaxSearchBatch). Memory is bounded by MaxQueued queries. Safe for concurrent use.
//
// Requests go to one of two lanes, each with its own encoder goroutines and search goroutine
// (a pipeline: a request split into many batches is encoded while its earlier batches are
// searched): the interactive lane takes requests of at most MaxBatch queries (a rollout's
// single query), the bulk lane larger ones (Search-R1's 2,560-query POST). In a lane, requests
// take turns, one batch's worth each (round robin in arrival order), so a request that arrives
// behind a big one gets into one of the next batches. The lanes' work is ordered at a
// gate.Gate (internal/gate says why): while an interactive request waits, bulk work pauses
// before its next batch and, inside a batch, at the encoder's and index's own pause points
// (encoder/bert before each op, index/flat before each stripe), and interactive work starts
// once the bulk unit in flight has ended: a single query waits for one unit of the big
// request's work, not for all of it, and then has the cores to itself. The lanes share the
// time by weighted fair queuing (half for bulk work while both have work): a steady stream
// of single queries slows a big request but never stops it. In the bulk lane, encoding and searching on backends that
// pause alternate unit by unit instead of running side by side.
type Batcher struct {
	enc    Encoder
	idx    Index
	prefix string
	opt    BatcherOptions

	gate              gate.Gate // held by the interactive lane's jobs, waited at by the bulk lane's work
	interactive, bulk *lane
	queued            atomic.Int64 // queries admitted and not yet answered
	dropped           atomic.Int64 // queries not encoded (or stopped part way), or not searched, because their requests' contexts ended first
}

// lane is a queue of requests with its own encoder goroutines (Encoders) and search goroutine.
type lane struct {
	b    *Batcher
	bulk bool // its work gives way to the interactive lane's at b.gate

	mu     sync.Mutex
	queue  []*request // requests with jobs left, in turn order
	closed bool

	wake    chan struct{} // capacity 1: a request was queued, the lane closed, or jobs are left for another encoder
	encoded chan *batch
	stopped chan struct{} // closed when the search goroutine returns
}

// NewBatcher starts the encoder and search goroutines; Close stops them. An option out of
// range is an *option.Error.
func NewBatcher(enc Encoder, idx Index, prefix string, opt BatcherOptions) (*Batcher, error) {
	if err := opt.Specs().Check(); err != nil {
		return nil, err
	}
	opt.MaxSearchBatch = max(opt.MaxSearchBatch, opt.MaxBatch)
	b := &Batcher{enc: enc, idx: idx, prefix: prefix, opt: opt}
	b.gate.Clock = opt.Clock
	b.interactive, b.bulk = b.startLane(false), b.startLane(true)
	return b, nil
}

// startLane starts a lane's goroutines.
func (b *Batcher) startLane(bulk bool) *lane {
	ln := &lane{b: b, bulk: bulk, wake: make(chan struct{}, 1),
		encoded: make(chan *batch, max(1, b.opt.MaxSearchBatch/b.opt.MaxBatch)), // a search's worth may wait
		stopped: make(chan struct{})}
	var encoders sync.WaitGroup
	for range b.opt.Encoders {
		encoders.Add(1)
		go func() {
			defer encoders.Done()
			ln.encodeLoop()
		}()
	}
	go func() {
		encoders.Wait()
		close(ln.encoded)
	}()
	go ln.searchLoop()
	return ln
}

// Queued is the number of queries admitted and not yet answered (the queue depth).
func (b *Batcher) Queued() int64 { return b.queued.Load() }

// Dropped counts the queries never encoded because their request's context ended before
// their batch was formed (a client that went away), those of batches whose encoding or
// search stopped part way because every request in them ended (ContextEncoder,
// ContextIndex), and those of encoded batches not searched because every request in them
// ended while they waited.
func (b *Batcher) Dropped() int64 { return b.dropped.Load() }

// BulkPauses counts the times bulk work (a request of more than MaxBatch queries) paused
// for interactive work (see Batcher).
func (b *Batcher) BulkPauses() int64 { return b.gate.Pauses() }

// Close stops the goroutines after the queued work is done. No Search may start after
// Close is called (the server stops accepting requests first).
func (b *Batcher) Close() {
	b.interactive.close()
	b.bulk.close()
	<-b.interactive.stopped
	<-b.bulk.stopped
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
	ln, interactive := b.bulk, !b.inBulkLane(n)
	if interactive {
		ln = b.interactive
	}
	chunks := (n + b.opt.MaxBatch - 1) / b.opt.MaxBatch
	done := make(chan error, chunks)
	r := &request{jobs: make([]*job, 0, chunks)}
	for lo := 0; lo < n; lo += b.opt.MaxBatch {
		hi := min(lo+b.opt.MaxBatch, n)
		r.jobs = append(r.jobs, &job{ctx: ctx, queries: queries[lo:hi], k: k,
			dist: dist[lo*k : hi*k], labels: labels[lo*k : hi*k], done: done, held: interactive})
		if interactive {
			b.gate.Enter()
		}
	}
	ln.add(r)
	var first error
	for range chunks {
		if err := <-done; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// inBulkLane reports whether a Search of n queries runs in the bulk lane.
func (b *Batcher) inBulkLane(n int) bool { return n > b.opt.MaxBatch }

// finish answers j and releases its queries from the queue count (and its hold on the gate).
func (b *Batcher) finish(j *job, err error) {
	b.queued.Add(-int64(len(j.queries)))
	if j.held {
		b.gate.Leave()
	}
	j.done <- err
}

// abandon answers j with its context's error err: its client went away before its batch was
// formed, and its queries count as dropped.
func (b *Batcher) abandon(j *job, err error) {
	b.dropped.Add(int64(len(j.queries)))
	b.finish(j, err)
}

// drop counts the queries of jobs as dropped.
func (b *Batcher) drop(jobs []*job) {
	for _, j := range jobs {
		b.dropped.Add(int64(len(j.queries)))
	}
}

// add queues r, whose turn comes after the requests already queued.
func (ln *lane) add(r *request) {
	ln.mu.Lock()
	ln.queue = append(ln.queue, r)
	ln.mu.Unlock()
	ln.signal()
}

// close lets the encoder goroutines return once the queue is empty.
func (ln *lane) close() {
	ln.mu.Lock()
	ln.closed = true
	ln.mu.Unlock()
	ln.signal()
}

// signal wakes one encoder goroutine waiting for work (a token if none waits).
func (ln *lane) signal() {
	select {
	case ln.wake <- struct{}{}:
	default:
	}
}

// take adds to jobs (n queries) the next jobs of the queue while they fit into one batch:
// each request gives its next job and, if it has more, goes back to the end of the queue
// (round robin). A request whose context ended is answered whole with its error (abandon).
// It reports full when a job that does not fit is left for the next batch, and whether the
// lane is closed. It wakes another encoder goroutine when work is left or the lane closed.
func (ln *lane) take(jobs []*job, n int) (_ []*job, _ int, full, closed bool) {
	ln.mu.Lock()
	for len(ln.queue) > 0 {
		r := ln.queue[0]
		if err := r.jobs[0].ctx.Err(); err != nil {
			ln.queue = ln.queue[1:]
			for _, j := range r.jobs {
				ln.b.abandon(j, err)
			}
			continue
		}
		j := r.jobs[0]
		if n+len(j.queries) > ln.b.opt.MaxBatch {
			break
		}
		jobs, n = append(jobs, j), n+len(j.queries)
		ln.queue, r.jobs = ln.queue[1:], r.jobs[1:]
		if len(r.jobs) > 0 {
			ln.queue = append(ln.queue, r)
		}
	}
	full, closed = len(ln.queue) > 0, ln.closed
	ln.mu.Unlock()
	if full || closed {
		ln.signal()
	}
	return jobs, n, full, closed
}

// gather returns the jobs of the next batch, waiting for the first one and then, with
// MaxWait, at most MaxWait for the batch to fill. open is false once the lane is closed and
// its queue empty.
func (ln *lane) gather() (jobs []*job, open bool) {
	n, full, closed := 0, false, false
	for len(jobs) == 0 {
		if jobs, n, full, closed = ln.take(nil, 0); len(jobs) == 0 {
			if closed {
				return nil, false
			}
			<-ln.wake
		}
	}
	if ln.b.opt.MaxWait <= 0 {
		return jobs, true
	}
	t := time.NewTimer(ln.b.opt.MaxWait)
	defer t.Stop()
	for !full && !closed && n < ln.b.opt.MaxBatch {
		select {
		case <-ln.wake:
		case <-t.C:
			return jobs, true
		}
		jobs, n, full, closed = ln.take(jobs, n)
	}
	return jobs, true
}

// encodeLoop gathers queued jobs into batches, encodes them and hands them to searchLoop.
func (ln *lane) encodeLoop() {
	var texts []string
	rowOf := map[string]int{} // distinct text -> its row in the batch being built
	for {
		jobs, open := ln.gather()
		if !open {
			return
		}
		bt := &batch{}
		texts = texts[:0]
		clear(rowOf)
		for _, j := range jobs {
			if err := j.ctx.Err(); err != nil { // ended while the batch filled (MaxWait)
				ln.b.abandon(j, err)
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
			if ln.b.opt.OnBatch != nil {
				ln.b.opt.OnBatch(bt.n)
			}
			bt.vecs, bt.err = ln.encode(bt.jobs, texts)
			ln.encoded <- bt
		}
	}
}

// work runs f under a context that ends once every job's context has ended (no one waits for
// the work any more), as a unit of its lane at the gate: f begins when it is its lane's turn
// (internal/gate), and for bulk work with pauses (f's backend takes a context) the context
// carries its unit, which the backend pauses between its own units. Work that stopped because
// that context ended counts its queries as dropped.
func (ln *lane) work(jobs []*job, pauses bool, f func(ctx context.Context) error) error {
	ctx, release := untilAbandoned(jobs)
	defer release()
	g := &ln.b.gate
	var u *gate.Unit
	var err error
	if ln.bulk {
		if u, err = g.Begin(ctx, pauses); err == nil {
			ctx = gate.With(ctx, u)
		}
	} else {
		u, err = g.Interactive(ctx)
	}
	if err == nil {
		err = f(ctx)
		u.End()
	}
	if err != nil && ctx.Err() != nil {
		ln.b.drop(jobs)
	}
	return err
}

// encode encodes the distinct texts of a batch of jobs (see work). A ContextEncoder stops part
// way once every job's context has ended (their clients went away: no one waits for the
// vectors).
func (ln *lane) encode(jobs []*job, texts []string) ([]float32, error) {
	var vecs []float32
	ce, pauses := ln.b.enc.(ContextEncoder)
	err := ln.work(jobs, pauses, func(ctx context.Context) (err error) {
		if pauses {
			vecs, err = ce.EncodeContext(ctx, texts, ln.b.prefix)
		} else {
			vecs, err = ln.b.enc.Encode(texts, ln.b.prefix)
		}
		return err
	})
	return vecs, err
}

// search runs bt's index search into dist and labels (see work). A ContextIndex stops part way
// once every job's context has ended.
func (ln *lane) search(bt *batch, dist []float32, labels []int64) error {
	ci, pauses := ln.b.idx.(ContextIndex)
	return ln.work(bt.jobs, pauses, func(ctx context.Context) error {
		if pauses {
			return ci.SearchContext(ctx, bt.vecs, bt.k, dist, labels)
		}
		return ln.b.idx.Search(bt.vecs, bt.k, dist, labels)
	})
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

// coalesce appends to bt the encoded batches already waiting, up to MaxSearchBatch queries
// (k becomes the largest k). A batch that failed to encode or does not fit is returned as
// next, for the next search.
func (ln *lane) coalesce(bt *batch) (merged, next *batch) {
	if bt.err != nil {
		return bt, nil
	}
	for bt.n < ln.b.opt.MaxSearchBatch {
		var more *batch
		select {
		case more = <-ln.encoded:
		default:
		}
		if more == nil {
			return bt, nil
		}
		if more.err != nil || bt.n+more.n > ln.b.opt.MaxSearchBatch {
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
func (ln *lane) searchLoop() {
	defer close(ln.stopped)
	b := ln.b
	var dist []float32
	var labels []int64
	var next *batch // an encoded batch that did not fit into the previous search
	for {
		bt := next
		if bt == nil {
			var ok bool
			if bt, ok = <-ln.encoded; !ok {
				return
			}
		}
		bt, next = ln.coalesce(bt)
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
			err = ln.search(bt, dist, labels)
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
