package bm25

import (
	"bytes"
	"encoding/binary"
	"io"
	"slices"
	"unsafe"
)

// runPostings holds the postings of the run being built, term by term, without a pointer per
// term: the collector never scans it (a map of a million terms to postings slices cost a
// build about a fifth of its CPU in garbage collection), and a lookup compares a stored hash
// before any term bytes. Terms live in one byte arena, postings in chunks of doubling size
// inside pages of pageBytes, linked by offsets; an open-addressing table of (hash, term
// index) slots finds a term.
type runPostings struct {
	slots []slot // len a power of two; idx 0: empty
	terms []runTerm
	text  []byte   // the terms' bytes, back to back
	pages [][]byte // chunk storage, kept across runs; a chunk never spans two pages
	page  int      // the page being filled (-1: none yet in this run)
	used  int      // bytes used in it
	// touched keeps the loads of addBatch's first passes (whose only point is to bring cache
	// lines in) from being compiled away
	touched uint32
}

// slot is one entry of the open-addressing table: the term's first slotPrefixBytes bytes,
// its hash's high bits with its length in the low byte (slotTag), and its index in terms plus
// one. A term of at most slotPrefixBytes is matched by the slot alone: a lookup then reads no
// term bytes, which are elsewhere in memory (a cache miss per posting when they were
// compared).
type slot struct {
	prefix   [slotPrefixBytes]byte
	tag, idx uint32
}

// slotPrefixBytes covers most words of English text and of bench/zipf_corpus.py's.
const slotPrefixBytes = 16

func slotTag(h uint64, n int) uint32 { return uint32(h>>40)<<8 | uint32(min(n, 255)) }

func slotPrefix(term []byte) (p [slotPrefixBytes]byte) {
	copy(p[:], term)
	return p
}

// runTerm is one term of the run: 64 bytes, one cache line.
type runTerm struct {
	hash      uint64
	textOff   uint64
	head      uint64 // offset of the first chunk (page*pageBytes + byte)
	tail      uint64 // offset of the last chunk
	size      uint64 // postings bytes
	last      int64  // last row added
	df        int64
	textLen   uint16 // a term is at most 255 UTF-16 units (Lucene's token limit): < 1,024 bytes
	tailLevel uint16 // the last chunk holds chunkPayload(tailLevel) bytes
	tailUsed  uint32 // bytes used in the last chunk
}

const (
	pageBytes     = 1 << 20
	chunkHeader   = 8  // a chunk starts with the offset of the next chunk
	maxChunkLevel = 12 // payloads double from 8 bytes up to 32 KiB
)

func chunkPayload(level uint16) uint64 { return 8 << level }

func newRunPostings() *runPostings {
	return &runPostings{slots: make([]slot, 1<<16), page: -1}
}

// memory is the bytes the run uses (its budget's measure).
func (r *runPostings) memory() int64 {
	return int64(len(r.slots))*int64(unsafe.Sizeof(slot{})) + int64(cap(r.terms))*int64(unsafe.Sizeof(runTerm{})) +
		int64(cap(r.text)) + int64(r.page+1)*pageBytes
}

func (r *runPostings) len() int { return len(r.terms) }

// reset empties the run, keeping its memory for the next.
func (r *runPostings) reset() {
	clear(r.slots)
	r.terms, r.text = r.terms[:0], r.text[:0]
	r.page, r.used = -1, 0
}

// appendPosting appends (row - the previous row, freq) to the postings of terms[i].
func (r *runPostings) appendPosting(i int, row int64, freq int32) {
	t := &r.terms[i]
	delta := uint64(row - t.last)
	t.last = row
	t.df++
	if room := chunkPayload(t.tailLevel) - uint64(t.tailUsed); room >= 2 && delta < 0x80 && freq < 0x80 {
		// most postings of a run: two one-byte varints, written in place
		c := r.chunk(t.tail, t.tailLevel)
		c[t.tailUsed], c[t.tailUsed+1] = byte(delta), byte(freq)
		t.tailUsed += 2
		t.size += 2
		return
	}
	var buf [2 * binary.MaxVarintLen64]byte
	n := binary.PutUvarint(buf[:], delta)
	n += binary.PutUvarint(buf[n:], uint64(freq))
	t.size += uint64(n)
	for p := buf[:n]; len(p) > 0; {
		if uint64(t.tailUsed) == chunkPayload(t.tailLevel) {
			r.grow(t)
		}
		c := r.chunk(t.tail, t.tailLevel)
		k := copy(c[t.tailUsed:], p)
		t.tailUsed += uint32(k)
		p = p[k:]
	}
}

// termIndex finds term's index in terms (h: its termHash), adding an empty entry where it is
// new.
func (r *runPostings) termIndex(term []byte, h uint64) int {
	tag, prefix := slotTag(h, len(term)), slotPrefix(term)
	mask := uint64(len(r.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := r.slots[i]
		if s.idx == 0 {
			break
		}
		if s.tag == tag && s.prefix == prefix {
			j := int(s.idx - 1)
			if len(term) <= slotPrefixBytes || bytes.Equal(r.termText(j), term) {
				return j
			}
		}
	}
	if 4*(len(r.terms)+1) > 3*len(r.slots) {
		r.rehash(2 * len(r.slots))
	}
	r.terms = append(r.terms, runTerm{hash: h, textOff: uint64(len(r.text)), textLen: uint16(len(term)), last: -1})
	r.text = append(r.text, term...)
	r.place(h, tag, prefix, uint32(len(r.terms)))
	t := &r.terms[len(r.terms)-1]
	t.head = r.alloc(0)
	t.tail = t.head
	return len(r.terms) - 1
}

// termText is the bytes of terms[i].
func (r *runPostings) termText(i int) []byte {
	t := &r.terms[i]
	return r.text[t.textOff : t.textOff+uint64(t.textLen)]
}

// place puts a term's slot in the first empty slot of its hash's probe sequence.
func (r *runPostings) place(h uint64, tag uint32, prefix [slotPrefixBytes]byte, idx uint32) {
	mask := uint64(len(r.slots) - 1)
	i := h & mask
	for r.slots[i].idx != 0 {
		i = (i + 1) & mask
	}
	r.slots[i] = slot{prefix, tag, idx}
}

func (r *runPostings) rehash(n int) {
	r.slots = make([]slot, n)
	for i := range r.terms {
		term := r.termText(i)
		r.place(r.terms[i].hash, slotTag(r.terms[i].hash, len(term)), slotPrefix(term), uint32(i+1))
	}
}

// grow links a new chunk, twice the size of the last up to maxChunkLevel, after t's last.
func (r *runPostings) grow(t *runTerm) {
	level := min(t.tailLevel+1, maxChunkLevel)
	next := r.alloc(level)
	binary.LittleEndian.PutUint64(r.pages[t.tail/pageBytes][t.tail%pageBytes:], next)
	t.tail, t.tailLevel, t.tailUsed = next, level, 0
}

// alloc returns the offset of a new chunk of the level's payload.
func (r *runPostings) alloc(level uint16) uint64 {
	n := chunkHeader + int(chunkPayload(level))
	if r.page < 0 || r.used+n > pageBytes {
		if r.page++; r.page == len(r.pages) {
			r.pages = append(r.pages, make([]byte, pageBytes))
		}
		r.used = 0
	}
	off := uint64(r.page)*pageBytes + uint64(r.used)
	r.used += n
	return off
}

// chunk is the payload of the chunk at off.
func (r *runPostings) chunk(off uint64, level uint16) []byte {
	start := off%pageBytes + chunkHeader
	return r.pages[off/pageBytes][start : start+chunkPayload(level)]
}

// writeTo writes the run sorted by term: per term uvarint(len) term uvarint(df) uvarint(last
// row) uvarint(len) postings.
func (r *runPostings) writeTo(w io.Writer) error {
	order := make([]uint32, len(r.terms))
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int { return bytes.Compare(r.termText(int(a)), r.termText(int(b))) })
	var hdr []byte
	for _, i := range order {
		t := &r.terms[i]
		hdr = binary.AppendUvarint(hdr[:0], uint64(t.textLen))
		hdr = append(hdr, r.termText(int(i))...)
		hdr = binary.AppendUvarint(hdr, uint64(t.df))
		hdr = binary.AppendUvarint(hdr, uint64(t.last))
		hdr = binary.AppendUvarint(hdr, t.size)
		if _, err := w.Write(hdr); err != nil {
			return err
		}
		off, left := t.head, t.size
		for level := uint16(0); left > 0; level = min(level+1, maxChunkLevel) {
			c := r.chunk(off, level)
			c = c[:min(uint64(len(c)), left)]
			if _, err := w.Write(c); err != nil {
				return err
			}
			left -= uint64(len(c))
			off = binary.LittleEndian.Uint64(r.pages[off/pageBytes][off%pageBytes:])
		}
	}
	return nil
}
