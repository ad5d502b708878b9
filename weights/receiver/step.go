package receiver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"sync"

	"needle/internal/mapfile"
	"needle/kernels/trainer/delta"
	"needle/weights/store"
	"needle/weights/wire"
)

// build is the version being built in next, across the steps of a plan and across broken
// connections (a resumed step continues it).
type build struct {
	run      string
	version  uint64         // the version next holds whole (0: none yet)
	chunkMap *wire.ChunkMap // next's chunk map (of version, or of the open step once it is open)
	m        *mapped        // next, mapped; nil after a restart until the resumed step reopens it
	open     *wire.StepInfo // the step being received, nil between steps
	target   *wire.Target   // the open step's target
	record   int            // records of the open step applied in order: where a resume starts
	relay    *store.Step    // the open delta step as re-served, nil when not re-serving or full
	// snap is the full version being received as re-served while it arrives (a growing
	// snapshot of next), nil when not re-serving or after a delta step changed next.
	snap     *store.Snapshot
	full     bool     // the open step is full: its progress is saved for a restart
	manifest []uint64 // the manifest of the last step's version, if the upstream sent it
}

// dropBuild discards next (after an error that makes it useless).
func (r *Receiver) dropBuild(why error) {
	b := r.build
	if b == nil {
		return
	}
	if b.m != nil {
		b.m.close(false)
	}
	if b.relay != nil {
		r.opt.Store.FinishStep(b.relay, nil, fmt.Errorf("the relay gave the step up: %v", why))
	}
	if b.snap != nil {
		r.opt.Store.Retire(b.snap, true)
	}
	os.Remove(r.f.next)
	r.build = nil
	if r.st.Full != nil {
		r.st.Full = nil
		r.save()
	}
}

// step receives one step of a plan into next and returns the bytes received.
func (r *Receiver) step(ctx context.Context, run string, info wire.StepInfo, resumed bool) (int64, error) {
	stop := context.AfterFunc(ctx, func() { r.up.close() })
	defer stop()
	var s wire.Step
	k, p, _, err := r.up.next(nil)
	if err == nil {
		err = wire.Unmarshal(k, wire.KindStep, p, &s)
	}
	if err != nil {
		return 0, err
	}
	if s.StepInfo != info {
		return 0, dataError{fmt.Errorf("step %d -> %d came for planned step %d -> %d", s.From, s.To, info.From, info.To)}
	}
	l, err := wire.NewChunkMap(s.Header, s.Size, s.Chunk)
	if err != nil {
		return 0, dataError{fmt.Errorf("step %d -> %d: %w", s.From, s.To, err)}
	}
	if resumed {
		err = r.resumeStep(l, info, s.First)
	} else if s.First != 0 {
		err = dataError{fmt.Errorf("step %d -> %d starts at record %d, nothing was asked to resume", s.From, s.To, s.First)}
	} else {
		err = r.openStep(run, l, info)
	}
	if err != nil {
		return 0, err
	}
	end, n, err := r.records(s.First)
	if err != nil {
		return n, err
	}
	b := r.build
	if err := b.target.Complete(); err != nil {
		return n, dataError{err}
	}
	if b.relay != nil {
		r.opt.Store.FinishStep(b.relay, end.Manifest, nil)
	}
	if b.snap != nil && b.full {
		b.snap.Complete(end.Manifest)
	}
	b.version, b.chunkMap, b.manifest = info.To, l, end.Manifest
	b.open, b.target, b.relay, b.record, b.full = nil, nil, nil, 0, false
	return n, nil
}

// openStep prepares next for a new step: the whole file's space for a full step; for a delta
// step, the base version's bytes (from the spare, a copy of Out, or next itself in a chain),
// rebased when the step changes the chunk map.
func (r *Receiver) openStep(run string, l *wire.ChunkMap, info wire.StepInfo) error {
	if info.Full() {
		r.dropBuild(errors.New("a full step replaces it"))
		r.closeSpareMap()
		spare := r.st.Spare != 0
		r.st.Spare = 0
		r.st.Full = &wire.Resume{Run: run, To: info.To}
		if err := r.save(); err != nil {
			return err
		}
		if spare && os.Rename(r.f.spare, r.f.next) != nil { // its pages are overwritten, not allocated again
			os.Remove(r.f.spare)
		}
		m, err := allocateForWrites(r.f.next, l.Size)
		if err != nil {
			return localError{err}
		}
		r.build = &build{run: run, chunkMap: l, m: m, full: true}
		r.build.target = fullTarget(l, m)
		r.relayFull(run, info.To, l, 0)
	} else {
		if err := r.baseForDelta(run, info); err != nil {
			return err
		}
		b := r.build
		if b.snap != nil { // next changes in place now: readers of the full version it held stop
			r.opt.Store.Retire(b.snap, true)
			b.snap = nil
		}
		if !l.Same(b.chunkMap) {
			if err := r.rebase(l); err != nil {
				return err
			}
		}
		b.target = wire.NewTarget(l, b.m.Data, b.chunkMap)
		if r.opt.Store != nil {
			b.relay = store.NewStep(info.From, info.To, l)
			r.opt.Store.AddStep(b.relay)
		}
	}
	r.build.open = &info
	return nil
}

// baseForDelta makes next hold version info.From: it already does in a chain; otherwise it
// becomes the spare (a rename) or a copy of Out.
func (r *Receiver) baseForDelta(run string, info wire.StepInfo) error {
	if b := r.build; b != nil {
		if b.version != info.From || b.run != run {
			return dataError{fmt.Errorf("delta step %d -> %d, but the version being built is %d", info.From, info.To, b.version)}
		}
		return nil
	}
	if !r.verified || r.st.Version != info.From || r.st.Run != run {
		return dataError{fmt.Errorf("delta step %d -> %d of run %s, but %s is version %d of run %s", info.From, info.To, run, r.f.out, r.have(), r.st.Run)}
	}
	var m *mapped
	var err error
	if r.st.Spare == info.From {
		r.st.Spare = 0
		if err := r.save(); err != nil {
			return err
		}
		if err := os.Rename(r.f.spare, r.f.next); err != nil {
			return localError{err}
		}
		m, err = r.takeSpareMap(r.outChunkMap.Size)
	} else {
		r.closeSpareMap()
		if err = copyFile(r.f.next, r.f.out); err == nil {
			m, err = openMapped(r.f.next, r.outChunkMap.Size)
		}
	}
	if err != nil {
		return localError{err}
	}
	r.build = &build{run: run, version: info.From, chunkMap: r.outChunkMap, m: m}
	return nil
}

// rebase rewrites next in chunk map l: the step changes a tensor's dtype or shape, adds or
// removes tensors, so every offset may move.
func (r *Receiver) rebase(l *wire.ChunkMap) error {
	b := r.build
	tmp := r.f.next + ".rebase"
	nm, err := allocate(tmp, l.Size)
	if err != nil {
		return localError{err}
	}
	wire.Rebase(nm.Data, l, b.m.Data, b.chunkMap)
	b.m.close(false)
	if err := os.Rename(tmp, r.f.next); err != nil {
		nm.close(false)
		return localError{err}
	}
	b.m = nm
	return nil
}

// resumeStep continues the open step at record first: in the same process the build is
// still open; after a restart only a full step's file is, reopened here.
func (r *Receiver) resumeStep(l *wire.ChunkMap, info wire.StepInfo, first int) error {
	b := r.build
	if b == nil || b.open == nil || *b.open != info || first != b.record {
		return dataError{fmt.Errorf("step %d -> %d resumed at record %d, which is not what was asked", info.From, info.To, first)}
	}
	if b.m == nil { // restarted during a full step
		m, err := openMapped(r.f.next, l.Size)
		if err != nil {
			return localError{err}
		}
		b.m, b.chunkMap = m, l
		b.target = fullTarget(l, m) // its header again: a crash may have come before it was written
		b.target.ReceivedBefore(first)
		r.relayFull(b.run, info.To, l, first)
	}
	return nil
}

// relayFull re-serves the full version being written into next while it arrives, when this
// receiver re-serves: a growing snapshot of next, with its own read-only mapping and file (the
// build's are closed at the commit, the snapshot is served on), holding records 0..n-1.
func (r *Receiver) relayFull(run string, version uint64, l *wire.ChunkMap, n int) {
	if r.opt.Store == nil {
		return
	}
	f, data, release, err := mapfile.MapOpen(r.f.next, false)
	if err != nil {
		r.logf("needle weights recv: not relaying version %d while it arrives: %v", version, err)
		return
	}
	snap := store.NewGrowing(run, version, l, data, release)
	snap.File = f
	snap.Grow(n)
	r.opt.Store.SetRun(run)
	r.opt.Store.AddSnapshot(snap)
	r.build.snap = snap
}

// fullTarget is the target of a full step into m: l's header written, records by pwrite.
func fullTarget(l *wire.ChunkMap, m *mapped) *wire.Target {
	copy(m.Data, l.Header)
	t := wire.NewTarget(l, m.Data, nil)
	t.File = m.f
	return t
}

// item is a record on its way to an applying goroutine; buf is the frame buffer it views.
// Unless checked, its frame's check runs on that goroutine before the record is applied:
// the reader goes on to the next frame meanwhile.
type item struct {
	idx     int
	rec     wire.Record
	frame   wire.Frame
	checked bool
	buf     []byte
}

// check runs the frame's check if the reader did not.
func (it *item) check() error {
	if it.checked {
		return nil
	}
	return it.frame.Check()
}

// saveEvery is how often (in records) a full step's resume point is saved.
const saveEvery = 256

// records reads the open step's records from first up to its End, applying them on Threads
// goroutines, relaying them when re-serving. It returns the End and the bytes received.
func (r *Receiver) records(first int) (wire.End, int64, error) {
	b := r.build
	threads := r.opt.Threads
	free := make(chan []byte, 2*threads)
	for range 2 * threads {
		free <- nil
	}
	work := make(chan item, threads)
	prog := &progress{next: first, done: map[int]bool{}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var applyErr error
	for range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			debug.SetPanicOnFault(true) // a fault writing the mapping becomes an error, not a crash
			var scratch delta.Sparse
			for it := range work {
				mu.Lock()
				failed := applyErr != nil
				mu.Unlock()
				if !failed {
					err := it.check()
					if err == nil {
						err = apply(b.target, it.rec, &scratch)
					}
					if err != nil {
						mu.Lock()
						applyErr = err
						mu.Unlock()
					} else {
						prog.finish(it.idx)
						if b.snap != nil {
							b.snap.Grow(prog.applied())
						}
					}
				}
				free <- it.buf
			}
		}()
	}
	relayed := 0
	if b.relay != nil {
		relayed, _, _, _ = b.relay.Progress()
	}
	kind := "delta"
	if b.full {
		kind = "full"
	}
	var end wire.End
	var n int64
	var err error
	idx := first
	for {
		buf := <-free
		fr, nbuf, rerr := r.up.nextUnchecked(buf)
		k, p := fr.Kind, fr.Payload
		// A record is checked by the goroutine that applies it, unless it is relayed: what goes
		// on to other receivers is checked first.
		checked := k != wire.KindRecord || b.relay != nil && idx >= relayed || b.snap != nil
		if rerr == nil && checked {
			rerr = fr.Check()
		}
		if rerr != nil {
			free <- nbuf
			err = rerr
			break
		}
		n += int64(wire.HeaderLen + len(p))
		r.m.received(kind).Add(float64(wire.HeaderLen + len(p)))
		if k == wire.KindEnd {
			if uerr := wire.Unmarshal(k, wire.KindEnd, p, &end); uerr != nil {
				err = dataError{uerr}
			}
			free <- nbuf
			break
		}
		if k != wire.KindRecord {
			free <- nbuf
			err = wire.Unmarshal(k, wire.KindRecord, p, nil)
			if k != wire.KindError {
				err = dataError{err}
			}
			break
		}
		rec, perr := wire.ParseRecord(p)
		if perr != nil {
			free <- nbuf
			err = dataError{perr}
			break
		}
		if b.relay != nil && idx >= relayed {
			b.relay.Append(slices.Concat(fr.Head[:], p)) // the checked frame as it came: no second hash
		}
		if b.snap != nil { // sent on as it came once written: its check is not made again
			b.snap.SetRawHead(idx, slices.Concat(fr.Head[:], p[:wire.RecordHeaderLen]))
		}
		work <- item{idx: idx, rec: rec, frame: fr, checked: checked, buf: nbuf}
		idx++
		if b.full && idx%saveEvery == 0 {
			r.saveFull(prog.applied())
		}
		mu.Lock()
		failed := applyErr != nil
		mu.Unlock()
		if failed {
			break
		}
	}
	close(work)
	wg.Wait()
	b.record = prog.applied()
	if b.full {
		r.saveFull(b.record)
	}
	switch {
	case applyErr != nil:
		return end, n, dataError{applyErr}
	case err != nil:
		return end, n, err
	case end.Records != idx:
		return end, n, dataError{fmt.Errorf("step ended after %d records, its End counts %d", idx, end.Records)}
	}
	return end, n, nil
}

// saveFull records how many records of the open full step are applied, for a restart.
func (r *Receiver) saveFull(applied int) {
	if r.st.Full != nil && r.st.Full.Record != applied {
		r.st.Full.Record = applied
		if err := r.save(); err != nil {
			r.logf("needle weights recv: %v", err)
		}
	}
}

// apply applies one record; a fault on the mapping (the file truncated under the receiver)
// is an error.
func apply(t *wire.Target, rec wire.Record, scratch *delta.Sparse) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("writing chunk %d faulted (%v): the file changed under the receiver", rec.Chunk, p)
		}
	}()
	return t.Apply(rec, scratch)
}

// progress tracks which records are applied; applied() is how many are, in order from the
// step's first record (the goroutines finish out of order).
type progress struct {
	mu   sync.Mutex
	next int
	done map[int]bool
}

func (p *progress) finish(idx int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done[idx] = true
	for p.done[p.next] {
		delete(p.done, p.next)
		p.next++
	}
}

func (p *progress) applied() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}
