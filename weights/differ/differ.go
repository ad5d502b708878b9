// Package differ is the sender's background job for a published version. It cuts the new
// version into chunks (package layout) and, on several goroutines, encodes each chunk against
// the same chunk of the previous version with the native kernels of kernels/trainer/delta
// (raw bytes for a tensor the previous version lacks or holds with another dtype or shape),
// appends the records to a store.Step in chunk order as soon as they are ready, so that
// receivers stream them while the rest is still being encoded. It does not hash the new
// version for its manifest: that would cost the job ~40% more time before its last record
// (measured: BenchmarkRun), so the sender hashes after the step is finished.
package differ

import (
	"bytes"
	"fmt"
	"time"

	"needle/kernels/trainer/delta"
	"needle/weights/store"
	"needle/weights/wire"
)

// Stats describes one job.
type Stats struct {
	Chunks, Records   int
	Elements, Changed int64   // elements compared as deltas, and how many of them changed
	RawBytes          int64   // chunk bytes sent raw (no base, or a 1-byte dtype that changed)
	WireBytes         int64   // bytes of the step's frames
	AstraFlowBytes    int64   // AstraFlow's layout for the same changes: one 16-byte header, u32 index + raw value per change
	Seconds           float64 // wall time of the job
}

// window bounds how many chunks may be encoded ahead of the oldest one not yet appended.
const window = 64

type job struct {
	i     int
	done  chan struct{}
	frame []byte // nil: no record (the chunk did not change)
	st    Stats
	err   error
}

// Run encodes the step old -> cur into step with format f on threads goroutines. The caller
// holds references to both snapshots, appends nothing to step itself, and finishes step.
func Run(old, cur *store.Snapshot, step *store.Step, f delta.Format, threads int) (Stats, error) {
	start := time.Now()
	l := cur.Layout
	st := Stats{Chunks: l.Chunks()}
	match := l.Match(old.Layout)
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
				if off, ok := l.BaseOffset(old.Layout, match, j.i); ok {
					j.frame, j.st, j.err = w.encode(old.Data[off:], cur, j.i, f)
				} else {
					j.frame, j.st = raw(cur, j.i)
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
			step.Append(j.frame)
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

func (s *Stats) add(o Stats) {
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
func (w *worker) encode(base []byte, cur *store.Snapshot, i int, f delta.Format) ([]byte, Stats, error) {
	l := cur.Layout
	t, off, n := l.Span(i)
	nb, ob := cur.Data[off:off+n], base[:n]
	es := l.DeltaElem(t)
	if es == 0 { // 1-byte elements: raw when changed
		if bytes.Equal(ob, nb) {
			return nil, Stats{}, nil
		}
		f, st := raw(cur, i)
		return f, st, nil
	}
	if err := delta.Encode(&w.sp, ob, nb, es, 1); err != nil {
		return nil, Stats{}, err
	}
	st := Stats{Elements: n / int64(es), Changed: w.sp.Count(), AstraFlowBytes: w.sp.Count() * int64(4+es)}
	if st.Changed == 0 {
		return nil, st, nil
	}
	a := appender(make([]byte, wire.HeaderLen, wire.HeaderLen+wire.RecordHeaderLen+64+int(st.Changed)*(es+2)))
	a = wire.AppendRecordHeader(a, i, wire.OpFor(f), es)
	if _, err := delta.WriteRecord(&a, f, &w.sp, ob, nb); err != nil {
		return nil, Stats{}, err
	}
	wire.PutHeader(a[:wire.HeaderLen], wire.KindRecord, a[wire.HeaderLen:])
	return a, st, nil
}

// raw returns the record of chunk i as its raw bytes.
func raw(cur *store.Snapshot, i int) ([]byte, Stats) {
	_, off, n := cur.Layout.Span(i)
	f := make([]byte, wire.HeaderLen, wire.HeaderLen+wire.RecordHeaderLen+int(n))
	f = append(wire.AppendRecordHeader(f, i, wire.OpRaw, 0), cur.Data[off:off+n]...)
	wire.PutHeader(f[:wire.HeaderLen], wire.KindRecord, f[wire.HeaderLen:])
	return f, Stats{RawBytes: n}
}

// appender is an io.Writer that appends to itself (delta.WriteRecord writes into a frame).
type appender []byte

func (a *appender) Write(p []byte) (int, error) {
	*a = append(*a, p...)
	return len(p), nil
}
