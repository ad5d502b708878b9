package wire

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"needle/kernels/trainer/delta"
)

// Target is the applying side of a step: a file of chunk map L being brought to the step's
// version, record by record, each checked against the chunk map first. It works on byte slices:
// the whole file in place (Apply: a receiver's writable mapping), or one chunk at a time in a
// buffer its caller then writes (ApplyTo: a delta file's output); files, durability and the
// order of steps are its caller's. Apply and ApplyTo may be called from several goroutines for
// different chunks.
type Target struct {
	L    *ChunkMap
	Data []byte // the whole file, writable, its chunks with a base holding the base's bytes; nil for ApplyTo only
	// File, when set, is Data's file: Apply writes raw records with it (pwrite) instead of
	// copying them into Data. A fresh tmpfs page written so is never zeroed first, nor mapped,
	// as it is when a write through the mapping touches it.
	File io.WriterAt

	changed  atomic.Int64 // elements changed by the delta records applied
	mu       sync.Mutex
	needs    []bool // chunks that have no base bytes: a record must come for each
	received []bool // chunks a record was applied to
}

// NewTarget returns a target whose data holds, for every chunk of l whose tensor base has
// (ChunkMap.Match), the base version's bytes (Rebase, or a copy of a base of the same chunk map);
// data may be nil when only ApplyTo is used. base nil means a full step: every chunk must come
// as a record.
func NewTarget(l *ChunkMap, data []byte, base *ChunkMap) *Target {
	t := &Target{L: l, Data: data, needs: make([]bool, l.Chunks()), received: make([]bool, l.Chunks())}
	var match []int
	if base != nil {
		match = l.Match(base)
	}
	for i := range t.needs {
		tensor, _, _ := l.Span(i)
		t.needs[i] = base == nil || match[tensor] < 0
	}
	return t
}

// Apply writes rec into its chunk of Data. A record that does not fit its chunk (index, op,
// element size, length, or a delta that does not decode or whose indices fall outside the
// chunk) is an error and leaves the chunk as it was. scratch holds decoded entries across
// calls of one goroutine.
func (t *Target) Apply(rec Record, scratch *delta.Sparse) error {
	if rec.Chunk < 0 || rec.Chunk >= t.L.Chunks() {
		return fmt.Errorf("record for chunk %d; the chunk map has %d", rec.Chunk, t.L.Chunks())
	}
	tensor, off, n := t.L.Span(rec.Chunk)
	if rec.Op != OpRaw || t.File == nil {
		return t.ApplyTo(t.Data[off:off+n], rec, scratch)
	}
	if int64(len(rec.Body)) != n {
		return t.rawSizeError(tensor, rec, n)
	}
	if _, err := t.File.WriteAt(rec.Body, off); err != nil {
		return fmt.Errorf("tensor %q chunk %d: %w", t.L.Tensors[tensor].Name, rec.Chunk, err)
	}
	t.markReceived(rec.Chunk)
	return nil
}

func (t *Target) rawSizeError(tensor int, rec Record, n int64) error {
	return fmt.Errorf("tensor %q chunk %d: raw record of %d bytes for a %d-byte chunk", t.L.Tensors[tensor].Name, rec.Chunk, len(rec.Body), n)
}

// ApplyTo is Apply into chunk, the bytes of rec's chunk held apart from Data (the base's bytes
// where the chunk has a base).
func (t *Target) ApplyTo(chunk []byte, rec Record, scratch *delta.Sparse) error {
	if rec.Chunk < 0 || rec.Chunk >= t.L.Chunks() {
		return fmt.Errorf("record for chunk %d; the chunk map has %d", rec.Chunk, t.L.Chunks())
	}
	tensor, _, n := t.L.Span(rec.Chunk)
	name := t.L.Tensors[tensor].Name
	if int64(len(chunk)) != n {
		return fmt.Errorf("tensor %q chunk %d: %d bytes given for a %d-byte chunk", name, rec.Chunk, len(chunk), n)
	}
	if rec.Op == OpRaw {
		if int64(len(rec.Body)) != n {
			return t.rawSizeError(tensor, rec, n)
		}
		copy(chunk, rec.Body)
	} else {
		if t.needs[rec.Chunk] {
			return fmt.Errorf("tensor %q chunk %d: a delta record for a chunk with no base (the base has no tensor of that name, dtype and shape)", name, rec.Chunk)
		}
		if es := t.L.DeltaElem(tensor); rec.ElemSize != es {
			return fmt.Errorf("tensor %q chunk %d: delta of %d-byte elements, the tensor's are compared as %d", name, rec.Chunk, rec.ElemSize, es)
		}
		changed, err := ApplyRecord(chunk, rec.ElemSize, rec.Op.Format(), rec.Body, scratch, 1)
		if err != nil {
			return fmt.Errorf("tensor %q chunk %d: %w", name, rec.Chunk, err)
		}
		t.changed.Add(changed)
	}
	t.markReceived(rec.Chunk)
	return nil
}

// markReceived records that chunk got its record. A chunk may get its record twice when a
// broken transfer resumes from the last record known applied in order: records are idempotent.
func (t *Target) markReceived(chunk int) {
	t.mu.Lock()
	t.received[chunk] = true
	t.mu.Unlock()
}

// Changed is the number of elements the delta records applied so far changed (a record
// applied twice counts twice).
func (t *Target) Changed() int64 { return t.changed.Load() }

// ReceivedBefore marks chunks [0, n) received: a full step resumed at record n after a restart
// (a full step sends every chunk, record i for chunk i).
func (t *Target) ReceivedBefore(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range min(n, len(t.received)) {
		t.received[i] = true
	}
}

// Complete checks, once a step's records are all applied, that every chunk without a base got
// one: otherwise the file would hold whatever its bytes were before.
func (t *Target) Complete() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, need := range t.needs {
		if need && !t.received[i] {
			tensor, _, _ := t.L.Span(i)
			return fmt.Errorf("tensor %q chunk %d: no record came for a chunk with no base", t.L.Tensors[tensor].Name, i)
		}
	}
	return nil
}

// Rebase fills dst, a file of chunk map l, with l's header and, for each tensor of l that base
// holds with the same name, dtype and shape, the tensor's bytes from src (a file of chunk map
// base): the starting point of a step whose chunk map differs from its base's. Other tensors'
// bytes are left for the step's raw records.
func Rebase(dst []byte, l *ChunkMap, src []byte, base *ChunkMap) {
	copy(dst, l.Header)
	hdr, bhdr := int64(len(l.Header)), int64(len(base.Header))
	for i, j := range l.Match(base) {
		if j >= 0 {
			t, b := l.Tensors[i], base.Tensors[j]
			copy(dst[hdr+t.Begin:hdr+t.End], src[bhdr+b.Begin:bhdr+b.End])
		}
	}
}
