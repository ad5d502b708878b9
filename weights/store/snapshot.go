// Package store holds what a weight-transfer node can serve and plans each client's transfer
// from it. Snapshots are whole versions readable in place (a sender's shared-memory half, a
// receiver's published file); steps are the records that turn one version into the next,
// complete or still being produced (by the sender's encode job, or relayed by a receiver as
// they arrive from its own upstream). The server streams what Plan returns; the store never
// touches a socket.
package store

import (
	"context"
	"fmt"
	"os"
	"sync"

	"needle/weights/wire"
)

// Snapshot is one whole version, mapped read-only. Readers Acquire it before touching Data
// and Release it after; the owner retires it through Store.Retire, after which no new reader
// gets it and release (the owner's unmap) runs once the last reader has left.
//
// A growing snapshot (NewGrowing) is a version still arriving at a relay, in record order:
// readers send record i once it is there (WaitRecord) and the version's end once it is whole
// (WaitComplete), so a relay forwards a full version while it receives it.
type Snapshot struct {
	Run        string
	Version    uint64
	wire.Image // ChunkMap and Data, the whole file: valid while a reference is held
	// File, when the owner keeps it open, is Data's file: a full step is sent from it with
	// sendfile (its pages go to the socket by reference, not copied through the process).
	File *os.File

	release func() // the owner's cleanup (munmap), run once retired and unreferenced

	mu       sync.Mutex
	refs     int
	retired  bool
	gone     chan struct{} // closed when retired with abort: readers must stop at once
	idle     chan struct{} // closed when retired and unreferenced
	manifest []uint64
	hashing  sync.Mutex    // one computation of the manifest at a time
	heads    []rawHead     // per chunk, made once for every reader (RawRecordHead)
	ready    int           // records 0..ready-1 are in Data; all of them once complete
	complete bool          // the whole version is in Data
	more     chan struct{} // closed and replaced when ready grows or the snapshot completes
}

// rawHead is the frame and record header of one chunk's raw record.
type rawHead struct {
	once sync.Once
	b    []byte
}

// NewSnapshot wraps a mapped version; release (may be nil) runs when it is retired and no
// reader holds it.
func NewSnapshot(run string, version uint64, l *wire.ChunkMap, data []byte, release func()) *Snapshot {
	s := NewGrowing(run, version, l, data, release)
	s.ready, s.complete = l.Chunks(), true
	return s
}

// NewGrowing wraps a mapping of a version whose records are still being written into it, in
// order: its owner calls Grow as they land and Complete at the end.
func NewGrowing(run string, version uint64, l *wire.ChunkMap, data []byte, release func()) *Snapshot {
	return &Snapshot{Run: run, Version: version, Image: wire.Image{ChunkMap: l, Data: data}, release: release,
		gone: make(chan struct{}), idle: make(chan struct{}), heads: make([]rawHead, l.Chunks()), more: make(chan struct{})}
}

// SetRawHead gives record i's frame and record header as it arrived (the relay forwards the
// frame as it came: RawRecordHead then hashes nothing). Call it before Grow covers i.
func (s *Snapshot) SetRawHead(i int, head []byte) {
	h := &s.heads[i]
	h.once.Do(func() { h.b = head })
}

// Grow says records 0..n-1 are in Data (n never decreases).
func (s *Snapshot) Grow(n int) {
	s.mu.Lock()
	if n > s.ready {
		s.ready = n
		s.wakeReaders()
	}
	s.mu.Unlock()
}

// Complete says the whole version is in Data; manifest (nil if unknown) is its manifest.
func (s *Snapshot) Complete(manifest []uint64) {
	s.mu.Lock()
	s.ready, s.complete = s.ChunkMap.Chunks(), true
	if manifest != nil {
		s.manifest = manifest
	}
	s.wakeReaders()
	s.mu.Unlock()
}

func (s *Snapshot) wakeReaders() {
	close(s.more)
	s.more = make(chan struct{})
}

// WaitRecord waits until record i is in Data. It fails when the snapshot is retired with
// abort (its bytes will not all come) or ctx ends.
func (s *Snapshot) WaitRecord(ctx context.Context, i int) error {
	return s.wait(ctx, func() bool { return i < s.ready })
}

// WaitComplete waits until the whole version is in Data, as WaitRecord.
func (s *Snapshot) WaitComplete(ctx context.Context) error {
	return s.wait(ctx, func() bool { return s.complete })
}

func (s *Snapshot) wait(ctx context.Context, done func() bool) error {
	for {
		s.mu.Lock()
		ok, more := done(), s.more
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-more:
		case <-s.gone:
			return fmt.Errorf("version %d was given up while arriving", s.Version)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Whole reports whether the whole version is in Data.
func (s *Snapshot) Whole() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.complete
}

// RawRecordHead returns the frame header and record header that precede chunk i's bytes in
// its raw record (record i of a full step). The frame's check reads the whole chunk: it is
// made by the first reader that asks and shared with the others, which wait for it, so that
// receivers pulling the version at once do not each hash it (or given by SetRawHead). The
// caller holds a reference, and record i is in Data.
func (s *Snapshot) RawRecordHead(i int) []byte {
	h := &s.heads[i]
	h.once.Do(func() {
		_, off, n := s.ChunkMap.Span(i)
		b := wire.AppendRecordHeader(make([]byte, wire.HeaderLen, wire.HeaderLen+wire.RecordHeaderLen), i, wire.OpRaw, 0)
		wire.PutHeader(b[:wire.HeaderLen], wire.KindRecord, b[wire.HeaderLen:], s.Data[off:off+n])
		h.b = b
	})
	return h.b
}

// Acquire takes a reference; false when the snapshot is retired (do not read it).
func (s *Snapshot) Acquire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retired {
		return false
	}
	s.refs++
	return true
}

// Release drops a reference taken by Acquire.
func (s *Snapshot) Release() {
	s.mu.Lock()
	s.refs--
	last := s.retired && s.refs == 0
	s.mu.Unlock()
	if last {
		s.finish()
	}
}

// Gone is closed when the owner retires the snapshot because its memory is about to be
// overwritten: a reader must stop reading Data and Release it.
func (s *Snapshot) Gone() <-chan struct{} { return s.gone }

// retire marks the snapshot retired and returns a channel closed once no reader holds it.
func (s *Snapshot) retire(abort bool) <-chan struct{} {
	s.mu.Lock()
	first := !s.retired
	s.retired = true
	if abort && first {
		close(s.gone)
	}
	last := first && s.refs == 0
	s.mu.Unlock()
	if last {
		s.finish()
	}
	return s.idle
}

func (s *Snapshot) finish() {
	if s.release != nil {
		s.release()
	}
	close(s.idle)
}

// SetManifest records the version's manifest (computed by whoever read the whole file).
func (s *Snapshot) SetManifest(m []uint64) {
	s.mu.Lock()
	s.manifest = m
	s.mu.Unlock()
}

// KnownManifest is the manifest if it was set or computed, else nil.
func (s *Snapshot) KnownManifest() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.manifest
}

// Manifest returns the manifest, hashing Data with threads goroutines the first time. The
// caller holds a reference, and the snapshot is whole.
func (s *Snapshot) Manifest(threads int) []uint64 {
	s.hashing.Lock()
	defer s.hashing.Unlock()
	if m := s.KnownManifest(); m != nil {
		return m
	}
	m := s.ChunkMap.Hash(s.Data, threads)
	s.SetManifest(m)
	return m
}
