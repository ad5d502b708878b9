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
	pos      int    // offset in post of the next posting
	block    int    // block of doc
	shallow  int    // block of the last blockBound target, never before block
	doc      int64  // current row; noMore past the last, -1 before the first
	freq     uint64 //
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
	c.next()
	return c
}

// next moves to the next posting.
func (c *cursor) next() {
	if c.pos >= len(c.post) {
		c.doc = noMore
		return
	}
	d, n := binary.Uvarint(c.post[c.pos:])
	f, m := binary.Uvarint(c.post[c.pos+n:])
	c.pos += n + m
	c.doc += int64(d)
	c.freq = f
	for int64(readBlock(c.blocks, c.block).lastRow) < c.doc {
		c.block++
	}
	c.shallow = max(c.shallow, c.block)
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
		c.shallow = max(c.shallow, b)
	}
	for c.doc < target {
		c.next()
	}
	return c.doc
}

// blockBound returns the bound of the term's score on the rows of the block that holds row
// target or the first row after it, and that block's last row; 0 and noMore past the last
// block. It moves no posting.
func (c *cursor) blockBound(target int64) (float32, int64) {
	for c.shallow < c.nblocks && int64(readBlock(c.blocks, c.shallow).lastRow) < target {
		c.shallow++
	}
	if c.shallow == c.nblocks {
		return 0, noMore
	}
	b := readBlock(c.blocks, c.shallow)
	return termScore(c.weight, b.maxImpact), int64(b.lastRow)
}

// score is the term's BM25 score on row doc, the cursor's current posting.
func (c *cursor) score(x *Index, doc int64) float32 {
	return termScore(c.weight, impact(c.freq, x.normInverse[x.norms[doc]]))
}
