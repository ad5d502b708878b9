package flatscangpu

import (
	"cmp"
	"math"
	"slices"
)

// The host half of the top-k: the device hands each shard's best keys of every query, sorted
// (flatscangpu.cu: key = ordered score << 32 | 0xffffffff - label, 0 = no hit); MergeShards joins
// the shards' lists and finish turns one query's keys into FAISS's results.

// decode is a key's score (distance for L2) and label; key 0 is no hit.
func decode(key uint64, l2 bool) (float32, int64) {
	if key == 0 {
		if l2 {
			return math.MaxFloat32, -1
		}
		return -math.MaxFloat32, -1
	}
	u := uint32(key >> 32)
	if l2 {
		u = ^u
	}
	if u&0x80000000 != 0 {
		u &= 0x7fffffff
	} else {
		u = ^u
	}
	return math.Float32frombits(u), int64(0xffffffff - uint32(key))
}

// MergeShards returns the best n keys of lists (each sorted best first, zero-padded), best
// first, in dst's storage. Keys of different shards never tie: their labels differ.
func MergeShards(dst []uint64, lists [][]uint64, n int) []uint64 {
	dst = dst[:0]
	for _, l := range lists {
		dst = append(dst, l[:min(n, len(l))]...)
	}
	slices.SortFunc(dst, func(a, b uint64) int { return cmp.Compare(b, a) })
	return dst[:min(n, len(dst))]
}

// hit is one decoded result.
type hit struct {
	score float32
	label int64
}

// Finish writes one query's k results to dist and labels from its candidate keys (best first
// under the device's order: better score, then lower label), as FAISS's IndexFlat search
// returns them (faiss/utils/Heap.h, checked against FAISS in keys_test.go):
//   - L2: the first k (FAISS's heap keeps and orders equal distances by lower label);
//   - inner product: FAISS's heap admits a row only when strictly better than its worst, and
//     evicts the lowest label first among equal worst scores, then lists equal scores by higher
//     label first. So among the rows tying at the k-th score s it keeps, of the tied rows met
//     before k rows scoring >= s had been seen, the last ones. For that, keys holds 2k
//     candidates (all rows better than s and at least k+1 of the tied ones, the lowest labels).
//
// Missing results are label -1 with FAISS's distance (-MaxFloat32 for IP, MaxFloat32 for L2).
func Finish(keys []uint64, k int, l2 bool, dist []float32, labels []int64) {
	hits := make([]hit, 0, len(keys))
	for _, key := range keys {
		if key == 0 {
			break
		}
		s, l := decode(key, l2)
		hits = append(hits, hit{s, l})
	}
	out := hits
	if !l2 && len(hits) > k {
		out = ipTies(hits, k)
	}
	out = out[:min(k, len(out))]
	if !l2 { // FAISS's order among equal inner products: higher label first
		slices.SortStableFunc(out, func(a, b hit) int {
			if a.score != b.score {
				return cmp.Compare(b.score, a.score)
			}
			return cmp.Compare(b.label, a.label)
		})
	}
	for j := range k {
		if j < len(out) {
			dist[j], labels[j] = out[j].score, out[j].label
		} else {
			dist[j], labels[j] = decode(0, l2)
		}
	}
}

// ipTies picks FAISS's k rows from more than k inner-product hits (best first, lower label
// first among ties): the rows better than the k-th score s, then, of the rows tying at s, the
// last of those FAISS's heap admitted.
func ipTies(hits []hit, k int) []hit {
	s := hits[k-1].score
	better := 0
	for better < len(hits) && hits[better].score > s {
		better++
	}
	tiedEnd := better
	for tiedEnd < len(hits) && hits[tiedEnd].score == s {
		tiedEnd++
	}
	tied := hits[better:tiedEnd] // ascending labels
	// Walk the rows scoring >= s in label order (FAISS's scan order) to the k-th of them:
	// the tied rows up to there are the ones the heap admitted.
	betterLabels := make([]int64, better)
	for i := range betterLabels {
		betterLabels[i] = hits[i].label
	}
	slices.Sort(betterLabels)
	admitted, b := 0, 0
	for seen := 0; seen < k; seen++ {
		if admitted < len(tied) && (b == len(betterLabels) || tied[admitted].label < betterLabels[b]) {
			admitted++
		} else {
			b++
		}
	}
	ties := k - better
	out := append(slices.Clone(hits[:better]), tied[admitted-ties:admitted]...)
	return out
}
