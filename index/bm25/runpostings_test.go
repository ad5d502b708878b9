package bm25

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRunPostingsWritesWhatAppendWrites: the chunked, pointer-free run writes byte for byte
// the records of a plain map of appended uvarint slices (the oracle), for 400,000 terms of
// 2 to 26 bytes (the table grows many times) of which a few get postings long enough to span chunks of every
// level and many pages; and again after a reset, reusing its pages.
func TestRunPostingsWritesWhatAppendWrites(t *testing.T) {
	r := newRunPostings()
	rng := rand.New(rand.NewPCG(9, 10))
	for round := range 2 {
		type ref struct {
			buf      []byte
			last, df int64
		}
		want := map[string]*ref{}
		for row := range int64(20_000) {
			var terms []string
			for j := range 10 + rng.IntN(30) {
				if j < 4 {
					terms = append(terms, fmt.Sprintf("common%d", j)) // in every row
				} else {
					// short terms are matched by their slot alone, longer ones share their
					// first slotPrefixBytes and are told apart by their bytes
					terms = append(terms, fmt.Sprintf([]string{"t%d", "a-prefix-of-16-bytes-%d"}[j%2], rng.IntN(200_000)))
				}
			}
			slices.Sort(terms)
			for _, term := range slices.Compact(terms) {
				freq := int32(1 + rng.IntN(300)) // one- and two-byte uvarints
				r.appendPosting(r.termIndex([]byte(term), termHash([]byte(term))), 100*row+int64(round), freq)
				w := want[term]
				if w == nil {
					w = &ref{last: -1}
					want[term] = w
				}
				w.buf = binary.AppendUvarint(w.buf, uint64(100*row+int64(round)-w.last))
				w.buf = binary.AppendUvarint(w.buf, uint64(freq))
				w.last, w.df = 100*row+int64(round), w.df+1
			}
		}
		var expect bytes.Buffer
		keys := make([]string, 0, len(want))
		for k := range want {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			w := want[k]
			rec := binary.AppendUvarint(nil, uint64(len(k)))
			rec = append(rec, k...)
			rec = binary.AppendUvarint(rec, uint64(w.df))
			rec = binary.AppendUvarint(rec, uint64(w.last))
			rec = binary.AppendUvarint(rec, uint64(len(w.buf)))
			expect.Write(append(rec, w.buf...))
		}
		var got bytes.Buffer
		if err := r.writeTo(&got); err != nil {
			t.Fatal(err)
		}
		if r.len() != len(want) || !bytes.Equal(got.Bytes(), expect.Bytes()) {
			t.Fatalf("round %d: %d terms, %d bytes written; want %d terms, %d bytes", round, r.len(), got.Len(), len(want), expect.Len())
		}
		if top := slices.MaxFunc(r.terms, func(a, b runTerm) int { return int(a.tailLevel) - int(b.tailLevel) }); top.tailLevel != maxChunkLevel {
			t.Fatalf("round %d: the longest postings reached chunk level %d, not the last (%d)", round, top.tailLevel, maxChunkLevel)
		}
		if r.page < 2 {
			t.Fatalf("round %d used %d pages: the test should span several", round, r.page+1)
		}
		r.reset()
	}
}

// TestRunPostingsTellsLongTermsApart: two terms longer than a slot's prefix with the same
// prefix, length and slot tag (a hash collision, forced here) stay two terms.
func TestRunPostingsTellsLongTermsApart(t *testing.T) {
	a, b := []byte("a-shared-prefix-of-16-bytes-a"), []byte("a-shared-prefix-of-16-bytes-b")
	r := newRunPostings()
	r.appendPosting(r.termIndex(a, termHash(a)), 0, 1)
	hb := termHash(b)
	clear(r.slots) // a's slot moved to where b's lookup starts, with b's tag
	r.slots[hb&uint64(len(r.slots)-1)] = slot{slotPrefix(a), slotTag(hb, len(b)), 1}
	r.appendPosting(r.termIndex(b, hb), 1, 1)
	if r.len() != 2 {
		t.Fatalf("%d terms after adding %q and %q, want 2", r.len(), a, b)
	}
}
