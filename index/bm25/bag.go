package bm25

import (
	"bytes"
	"hash/maphash"
)

// termSeed seeds termHash: one for the process, so that the hashes a build's analyzing
// workers compute (bag) serve its postings tables (runPostings) too.
var termSeed = maphash.MakeSeed()

func termHash(term []byte) uint64 { return maphash.Bytes(termSeed, term) }

// bag counts the distinct terms of one text (a corpus row being indexed, a query) in
// first-seen order without allocating per term: their bytes go back to back into one
// buffer, found again through a small open-addressing table that a generation number
// empties in O(1). A map of strings allocated a string per distinct term of every row.
type bag struct {
	slots  []bagSlot // len a power of two, at least twice the distinct terms
	gen    uint32    // slots of another generation are empty
	text   []byte    // the distinct terms back to back
	ends   []int32   // end of each distinct term in text
	counts []int32
	hashes []uint64 // termHash of each distinct term
}

type bagSlot struct {
	gen uint32
	idx int32
}

// reset empties the bag for the next text.
func (b *bag) reset() {
	if b.slots == nil {
		b.slots = make([]bagSlot, 256)
	}
	if b.gen++; b.gen == 0 { // wrapped: old generations could match again
		clear(b.slots)
		b.gen = 1
	}
	b.text, b.ends, b.counts, b.hashes = b.text[:0], b.ends[:0], b.counts[:0], b.hashes[:0]
}

// add counts one occurrence of term; a term not yet in the bag is added only while it holds
// fewer than limit distinct terms (a query keeps its first maxClauses).
func (b *bag) add(term []byte, limit int) {
	h := termHash(term)
	mask := uint64(len(b.slots) - 1)
	i := h & mask
	for ; b.slots[i].gen == b.gen; i = (i + 1) & mask {
		if j := b.slots[i].idx; b.hashes[j] == h && bytes.Equal(b.term(int(j)), term) {
			b.counts[j]++
			return
		}
	}
	if len(b.ends) >= limit {
		return
	}
	b.text = append(b.text, term...)
	b.ends = append(b.ends, int32(len(b.text)))
	b.counts = append(b.counts, 1)
	b.hashes = append(b.hashes, h)
	b.slots[i] = bagSlot{b.gen, int32(len(b.ends) - 1)}
	if 2*len(b.ends) > len(b.slots) {
		b.rehash()
	}
}

func (b *bag) rehash() {
	b.slots = make([]bagSlot, 2*len(b.slots))
	mask := uint64(len(b.slots) - 1)
	for j, h := range b.hashes {
		i := h & mask
		for b.slots[i].gen == b.gen {
			i = (i + 1) & mask
		}
		b.slots[i] = bagSlot{b.gen, int32(j)}
	}
}

// len is the number of distinct terms.
func (b *bag) len() int { return len(b.ends) }

// term is the i-th distinct term, in first-seen order.
func (b *bag) term(i int) []byte {
	start := int32(0)
	if i > 0 {
		start = b.ends[i-1]
	}
	return b.text[start:b.ends[i]]
}
