package wire

import (
	"bytes"
	"fmt"
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

type job struct {
	i     int
	done  chan struct{}
	frame []byte // nil: no record (the chunk did not change)
	st    StepStats
	err   error
}

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
func EncodeStep(old, cur Image, f Format, threads int, hashes []uint64, emit func(frame []byte) error) (StepStats, error) {
	start := time.Now()
	l := cur.ChunkMap
	st := StepStats{Chunks: l.Chunks()}
	if hashes != nil && len(hashes) != l.Chunks() {
		return st, fmt.Errorf("%d manifest hashes for %d chunks", len(hashes), l.Chunks())
	}
	match := l.Match(old.ChunkMap)
	jobs := make(chan *job, threads)
	order := make(chan *job, window)
	go func() {
		for i := range l.Chunks() {
			j := &job{i: i, done: make(chan struct{})}
			order <- j
			jobs <- j
		}
		close(jobs)
		close(order)
	}()
	for range max(threads, 1) {
		go func() {
			var w worker
			for j := range jobs {
				if off, ok := l.BaseOffset(old.ChunkMap, match, j.i); ok {
					j.frame, j.st, j.err = w.encode(old.Data[off:], cur, j.i, f)
				} else {
					j.frame, j.st = raw(cur, j.i)
				}
				if hashes != nil {
					_, off, n := l.Span(j.i)
					hashes[j.i] = xxhash.Sum64(cur.Data[off : off+n])
				}
				close(j.done)
			}
		}()
	}
	var err error
	for j := range order {
		<-j.done
		if err == nil && j.err != nil {
			err = fmt.Errorf("chunk %d: %w", j.i, j.err)
		}
		if err != nil {
			continue // drain the jobs already queued
		}
		st.add(j.st)
		if j.frame != nil {
			err = emit(j.frame)
			st.Records++
			st.WireBytes += int64(len(j.frame))
		}
	}
	if st.Changed > 0 {
		st.AstraFlowBytes += 16
	}
	st.Seconds = time.Since(start).Seconds()
	return st, err
}

func (s *StepStats) add(o StepStats) {
	s.Elements += o.Elements
	s.Changed += o.Changed
	s.RawBytes += o.RawBytes
	s.AstraFlowBytes += o.AstraFlowBytes
}

// worker owns the scratch entries of one encoding goroutine.
type worker struct {
	sp delta.Sparse
}

// encode returns the record of chunk i of cur against base (the chunk's bytes in the old
// version start at base[0]), or nil when the chunk did not change.
func (w *worker) encode(base []byte, cur Image, i int, f Format) ([]byte, StepStats, error) {
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
	fr := make([]byte, HeaderLen, HeaderLen+RecordHeaderLen+64+int(st.Changed)*(es+2))
	fr = AppendRecordHeader(fr, i, OpFor(f), es)
	fr, err := AppendRecord(fr, f, &w.sp, ob, nb)
	if err != nil {
		return nil, StepStats{}, err
	}
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
