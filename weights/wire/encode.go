package wire

import (
	"bytes"
	"fmt"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"

	"needle/kernels/trainer/delta"
)

// Image is one version of a safetensors file: its chunk map and the whole file's bytes.
type Image struct {
	ChunkMap *ChunkMap
	Data     []byte
}

// StepStats describes the encoding of one step.
type StepStats struct {
	Chunks, Records   int
	Elements, Changed int64   // elements compared as deltas, and how many of them changed
	RawBytes          int64   // chunk bytes sent raw (no base, or a 1-byte dtype that changed)
	WireBytes         int64   // bytes of the step's frames
	AstraFlowBytes    int64   // AstraFlow's format for the same changes: one 16-byte header, u32 index + raw value per change
	Seconds           float64 // wall time of the encoding
}

// window bounds how many chunks may be encoded ahead of the oldest one not yet emitted.
const window = 64

// EncodeStep encodes the step from old to cur in format f on threads goroutines: each chunk of
// cur against the same tensor's bytes in old (ChunkMap.Match), with the native kernels of
// kernels/trainer/delta; raw bytes for a tensor old lacks or holds with another dtype or shape,
// and for a changed chunk of 1-byte elements; no record for an unchanged chunk. emit gets each
// record's frame (KindRecord) in chunk order as soon as it and the ones before it are ready, so
// that a sender streams them while the rest is encoded; an error of emit ends the step with it.
// With hashes (one per chunk of cur) it also fills cur's manifest, hashing each chunk while it
// is in cache after its compare: a sender leaves hashes nil and hashes after the step, as
// hashing inside delayed its last record by ~40% (BenchmarkEncodeStep); a delta file, which
// waits for the whole step anyway, hashes here.
//
// The goroutines take chunks in order from a counter and the one that finishes the oldest
// chunk not yet emitted emits it and every finished one after it: no goroutine hands work to
// another, so on a host with as many cores as threads every core encodes (a separate emitting
// goroutine had to be scheduled for each chunk, on a core an encoder then waited for).
func EncodeStep(old, cur Image, f Format, threads int, hashes []uint64, emit func(frame []byte) error) (StepStats, error) {
	start := time.Now()
	l := cur.ChunkMap
	if hashes != nil && len(hashes) != l.Chunks() {
		return StepStats{Chunks: l.Chunks()}, fmt.Errorf("%d manifest hashes for %d chunks", len(hashes), l.Chunks())
	}
	match := l.Match(old.ChunkMap)
	q := &chunkQueue{chunks: l.Chunks(), emit: emit, st: StepStats{Chunks: l.Chunks()}}
	q.wake = sync.NewCond(&q.mu)
	var wg sync.WaitGroup
	for range max(threads, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := workers.Get().(*worker)
			defer workers.Put(w)
			var frames slab
			for i, ok := q.claim(); ok; i, ok = q.claim() {
				var r chunkResult
				if off, ok := l.BaseOffset(old.ChunkMap, match, i); ok {
					r.frame, r.st, r.err = w.encode(&frames, old.Data[off:], cur, i, f)
				} else {
					r.frame, r.st = raw(cur, i)
				}
				if hashes != nil {
					_, off, n := l.Span(i)
					hashes[i] = xxhash.Sum64(cur.Data[off : off+n])
				}
				q.done(i, r)
			}
		}()
	}
	wg.Wait()
	if q.st.Changed > 0 {
		q.st.AstraFlowBytes += 16
	}
	q.st.Seconds = time.Since(start).Seconds()
	return q.st, q.err
}

// chunkResult is one chunk's outcome: its record's frame (nil: the chunk did not change).
type chunkResult struct {
	frame []byte
	st    StepStats
	err   error
	ready bool
}

// chunkQueue hands out a step's chunks in order and emits their results in order.
type chunkQueue struct {
	chunks int
	emit   func([]byte) error

	mu       sync.Mutex
	wake     *sync.Cond // a claim waits on it for the window to move
	next     int        // the next chunk to claim
	emitted  int        // chunks emitted (or dropped after an error)
	emitting bool       // a goroutine is emitting: the others leave their results to it
	results  [window]chunkResult
	st       StepStats
	err      error // the first error: no more claims, results dropped
}

// claim returns the next chunk to encode, once it is within window of the oldest not emitted;
// false when there is none left or the step failed.
func (q *chunkQueue) claim() (int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.err == nil && q.next < q.chunks && q.next >= q.emitted+window {
		q.wake.Wait()
	}
	if q.err != nil || q.next >= q.chunks {
		return 0, false
	}
	q.next++
	return q.next - 1, true
}

// done files chunk i's result; unless another goroutine is emitting, it emits every result
// that is next in order (unlocked during emit, so the others file theirs meanwhile).
func (q *chunkQueue) done(i int, r chunkResult) {
	q.mu.Lock()
	defer q.mu.Unlock()
	r.ready = true
	q.results[i%window] = r
	if q.emitting {
		return
	}
	q.emitting = true
	for q.emitted < q.chunks && q.results[q.emitted%window].ready {
		k := q.emitted
		r := q.results[k%window]
		q.results[k%window] = chunkResult{}
		q.emitted++
		q.wake.Broadcast()
		if q.err == nil && r.err != nil {
			q.err = fmt.Errorf("chunk %d: %w", k, r.err)
		}
		if q.err != nil {
			continue
		}
		q.st.add(r.st)
		if r.frame == nil {
			continue
		}
		q.mu.Unlock()
		err := q.emit(r.frame)
		q.mu.Lock()
		q.st.Records++
		q.st.WireBytes += int64(len(r.frame))
		if err != nil && q.err == nil {
			q.err = err
		}
	}
	q.emitting = false
}

func (s *StepStats) add(o StepStats) {
	s.Elements += o.Elements
	s.Changed += o.Changed
	s.RawBytes += o.RawBytes
	s.AstraFlowBytes += o.AstraFlowBytes
}

// worker owns the scratch buffers of one encoding goroutine: the changed entries of a chunk
// and a packed record's payload before compression. Kept between steps (workers): their
// first use allocates and faults in megabytes.
type worker struct {
	sp      delta.Sparse
	payload []byte
}

var workers = sync.Pool{New: func() any { return new(worker) }}

// slab hands out the frames of one goroutine's records from blocks of slabBlock bytes: a
// record is written straight into its frame's place, with one allocation per block instead
// of one per record. A block lives as long as any frame cut from it (a step's frames are
// kept and dropped together).
type slab struct{ block []byte }

const slabBlock = 1 << 20

// room returns an empty slice with capacity for at least n bytes where the next frame goes.
func (b *slab) room(n int) []byte {
	if cap(b.block)-len(b.block) < n {
		b.block = make([]byte, 0, max(slabBlock, n))
	}
	return b.block[len(b.block):len(b.block)]
}

// keep returns fr, built on the slice room gave, with its capacity cut to its length, and
// moves the free end past it; fr that outgrew its room was reallocated and leaves the slab as
// it was.
func (b *slab) keep(fr []byte) []byte {
	if free := b.block[len(b.block):cap(b.block)]; len(fr) > 0 && len(fr) <= len(free) && &fr[0] == &free[:1][0] {
		b.block = b.block[:len(b.block)+len(fr)]
	}
	return fr[:len(fr):len(fr)]
}

// encode returns the record of chunk i of cur against base (the chunk's bytes in the old
// version start at base[0]), or nil when the chunk did not change; the frame is cut from
// frames.
func (w *worker) encode(frames *slab, base []byte, cur Image, i int, f Format) ([]byte, StepStats, error) {
	l := cur.ChunkMap
	t, off, n := l.Span(i)
	nb, ob := cur.Data[off:off+n], base[:n]
	es := l.DeltaElem(t)
	if es == 0 { // 1-byte elements: raw when changed
		if bytes.Equal(ob, nb) {
			return nil, StepStats{}, nil
		}
		f, st := raw(cur, i)
		return f, st, nil
	}
	if err := delta.Encode(&w.sp, ob, nb, es, 1); err != nil {
		return nil, StepStats{}, err
	}
	st := StepStats{Elements: n / int64(es), Changed: w.sp.Count(), AstraFlowBytes: w.sp.Count() * int64(4+es)}
	if st.Changed == 0 {
		return nil, st, nil
	}
	// Room for the record in AstraFlow's layout: a packed one is about a third of that (and
	// one that does not fit is reallocated by its append).
	fr := frames.room(HeaderLen + RecordHeaderLen + astraHeaderLen + 64 + len(w.sp.Indices) + len(w.sp.Values))
	fr = AppendRecordHeader(fr[:HeaderLen], i, OpFor(f), es)
	fr, err := AppendRecord(fr, f, &w.sp, ob, nb, &w.payload)
	if err != nil {
		return nil, StepStats{}, err
	}
	fr = frames.keep(fr)
	PutHeader(fr[:HeaderLen], KindRecord, fr[HeaderLen:])
	return fr, st, nil
}

// raw returns the record of chunk i as its raw bytes.
func raw(cur Image, i int) ([]byte, StepStats) {
	_, off, n := cur.ChunkMap.Span(i)
	fr := make([]byte, HeaderLen, HeaderLen+RecordHeaderLen+int(n))
	fr = append(AppendRecordHeader(fr, i, OpRaw, 0), cur.Data[off:off+n]...)
	PutHeader(fr[:HeaderLen], KindRecord, fr[HeaderLen:])
	return fr, StepStats{RawBytes: n}
}
