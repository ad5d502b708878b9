package bm25

import (
	"encoding/binary"
	"math"
)

// noMore is a cursor's doc past its last posting.
const noMore = math.MaxInt64

// cursor walks one query term's postings, skipping whole blocks where asked.
type cursor struct {
	post     []byte // the term's postings: (doc delta, freq) uvarint pairs
	start    uint64 // post's offset in bm25.postings (block ends are absolute)
	blocks   []byte // the term's block records (bm25.blocks)
	nblocks  int
	pos      int   // offset in post of the next posting
	block    int   // block of doc
	blockEnd int64 // last row of block: next decodes a block record only when doc passes it
	shallow  int   // the first block that may hold rows of the current window (windowStart)
	doc      int64 // current row; noMore past the last, -1 before the first
	freq     uint64
	weight   float32
	maxScore float32 // bound of the term's score on any row
}

func newCursor(post, blocks []byte, weight float32, x *Index) *cursor {
	c := &cursor{post: post, blocks: blocks, nblocks: len(blocks) / blockEntrySize, doc: -1, weight: weight}
	c.start = readBlock(blocks, c.nblocks-1).end - uint64(len(post)) // the last block ends with post
	var best float32
	for i := range c.nblocks {
		best = max(best, readBlock(blocks, i).maxImpact)
	}
	c.maxScore = termScore(weight, best)
	c.blockEnd = int64(readBlock(blocks, 0).lastRow)
	c.next()
	return c
}

// postingVarint decodes the (doc delta, freq) pair at the start of p, n bytes: the general
// case of next, which decodes one-byte pairs (most postings of long lists) itself.
func postingVarint(p []byte) (delta, freq uint64, n int) {
	d, a := binary.Uvarint(p)
	f, b := binary.Uvarint(p[a:])
	return d, f, a + b
}

// next moves to the next posting.
func (c *cursor) next() {
	if c.pos >= len(c.post) {
		c.doc = noMore
		return
	}
	p, n := c.post[c.pos:], 2
	var d, f uint64
	if len(p) >= 2 && p[0]|p[1] < 0x80 {
		d, f = uint64(p[0]), uint64(p[1])
	} else {
		d, f, n = postingVarint(p)
	}
	c.pos += n
	c.doc += int64(d)
	c.freq = f
	if c.doc > c.blockEnd {
		c.enterBlock()
	}
}

// enterBlock moves block to the block that holds doc.
func (c *cursor) enterBlock() {
	for c.block++; int64(readBlock(c.blocks, c.block).lastRow) < c.doc; c.block++ {
	}
	c.blockEnd = int64(readBlock(c.blocks, c.block).lastRow)
}

// advance moves to the first posting at or after row target, jumping over whole blocks that
// end before it, and returns its row.
func (c *cursor) advance(target int64) int64 {
	if c.doc >= target {
		return c.doc
	}
	b := c.block
	for b < c.nblocks && int64(readBlock(c.blocks, b).lastRow) < target {
		b++
	}
	if b == c.nblocks {
		c.doc = noMore
		return c.doc
	}
	if b > c.block {
		prev := readBlock(c.blocks, b-1)
		c.pos, c.doc, c.block = int(prev.end-c.start), int64(prev.lastRow), b
		c.blockEnd = int64(readBlock(c.blocks, b).lastRow)
	}
	// block b holds target or the first row after it, so the scan stops inside it: no end or
	// block check per posting (as next makes), and the freq kept is only the last one's
	p, pos, doc := c.post, c.pos, c.doc
	var f uint64
	for doc < target {
		var d uint64
		if p[pos]|p[pos+1] < 0x80 {
			d, f = uint64(p[pos]), uint64(p[pos+1])
			pos += 2
		} else {
			var n int
			d, f, n = postingVarint(p[pos:])
			pos += n
		}
		doc += int64(d)
	}
	c.pos, c.doc, c.freq = pos, doc, f
	return doc
}

// windowStart moves the shallow block to the block that holds row start or the first row
// after it and returns that block's last row; noMore past the last block. It moves no
// posting.
func (c *cursor) windowStart(start int64) int64 {
	b := max(c.shallow, c.block)
	for b < c.nblocks && int64(readBlock(c.blocks, b).lastRow) < start {
		b++
	}
	c.shallow = b
	if b == c.nblocks {
		return noMore
	}
	return int64(readBlock(c.blocks, b).lastRow)
}

// windowBound returns the bound of the term's score on the rows from the window's start
// (windowStart) to end: the largest impact bound of the blocks that may hold them, scored
// once (termScore grows with impact); 0 where no block does.
func (c *cursor) windowBound(end int64) float32 {
	if c.shallow == c.nblocks {
		return 0
	}
	var best float32
	for b := c.shallow; b < c.nblocks; b++ {
		r := readBlock(c.blocks, b)
		best = max(best, r.maxImpact)
		if int64(r.lastRow) >= end {
			break
		}
	}
	return termScore(c.weight, best)
}

// score is the term's BM25 score on row doc, the cursor's current posting.
func (c *cursor) score(x *Index, doc int64) float32 {
	return termScore(c.weight, impact(c.freq, x.normInverse[x.norms[doc]]))
}
