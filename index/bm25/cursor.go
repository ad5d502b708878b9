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
	shallow  int   // block of the last blockBound target, never before block
	// shallowEnd and shallowBound are block shallow's last row and score bound (noMore and 0
	// past the last block), decoded once per block rather than once per blockBound call
	shallowEnd   int64
	shallowBound float32
	doc          int64  // current row; noMore past the last, -1 before the first
	freq         uint64 //
	weight       float32
	maxScore     float32 // bound of the term's score on any row
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
	c.setShallow(0)
	c.next()
	return c
}

// setShallow moves the shallow block to b and decodes its record.
func (c *cursor) setShallow(b int) {
	c.shallow = b
	if b == c.nblocks {
		c.shallowEnd, c.shallowBound = noMore, 0
		return
	}
	r := readBlock(c.blocks, b)
	c.shallowEnd, c.shallowBound = int64(r.lastRow), termScore(c.weight, r.maxImpact)
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

// enterBlock moves block (and shallow, where behind) to the block that holds doc.
func (c *cursor) enterBlock() {
	for c.block++; int64(readBlock(c.blocks, c.block).lastRow) < c.doc; c.block++ {
	}
	c.blockEnd = int64(readBlock(c.blocks, c.block).lastRow)
	if c.shallow < c.block {
		c.setShallow(c.block)
	}
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
		if c.shallow < b {
			c.setShallow(b)
		}
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

// blockBound returns the bound of the term's score on the rows of the block that holds row
// target or the first row after it, and that block's last row; 0 and noMore past the last
// block. It moves no posting.
func (c *cursor) blockBound(target int64) (float32, int64) {
	if c.shallowEnd < target {
		b := c.shallow + 1
		for b < c.nblocks && int64(readBlock(c.blocks, b).lastRow) < target {
			b++
		}
		c.setShallow(b)
	}
	return c.shallowBound, c.shallowEnd
}

// score is the term's BM25 score on row doc, the cursor's current posting.
func (c *cursor) score(x *Index, doc int64) float32 {
	return termScore(c.weight, impact(c.freq, x.normInverse[x.norms[doc]]))
}
