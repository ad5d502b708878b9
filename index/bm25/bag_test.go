package bm25

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBagCountsAsAMap: the bag's distinct terms, their first-seen order and counts equal
// those of a map and a slice (the oracle), over texts of 1 to 3,000 words (the table grows
// past its first size), reused across texts, with and without a limit on distinct terms.
func TestBagCountsAsAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	var b bag
	for text := range 300 {
		limit := []int{1 << 30, 5, 1024}[text%3]
		b.reset()
		counts := map[string]int32{}
		var order []string
		for range 1 + rng.IntN(3000) {
			w := fmt.Sprintf("w%d", rng.IntN(1+rng.IntN(5000)))
			b.add([]byte(w), limit)
			if _, ok := counts[w]; ok {
				counts[w]++
			} else if len(order) < limit {
				counts[w] = 1
				order = append(order, w)
			}
		}
		var got []string
		for i := range b.len() {
			got = append(got, string(b.term(i)))
			if b.counts[i] != counts[string(b.term(i))] {
				t.Fatalf("text %d: %q counted %d, want %d", text, b.term(i), b.counts[i], counts[string(b.term(i))])
			}
		}
		if !slices.Equal(got, order) {
			t.Fatalf("text %d: %d distinct terms %.5q..., want %d %.5q...", text, len(got), got, len(order), order)
		}
	}
}

// TestBagGenerationWraps: after 2^32 resets the generation numbers come round again; the
// slots of the text that had the first one must not count for the text that gets it next.
func TestBagGenerationWraps(t *testing.T) {
	var b bag
	b.reset()
	b.add([]byte("old"), maxClauses)
	b.gen = math.MaxUint32 // as after 2^32 - 2 more resets that left the slots as they are
	b.reset()
	b.add([]byte("old"), maxClauses)
	b.add([]byte("new"), maxClauses)
	if b.len() != 2 || string(b.term(0)) != "old" || b.counts[0] != 1 {
		t.Fatalf("after the wrap: %d terms, counts %v", b.len(), b.counts)
	}
}
