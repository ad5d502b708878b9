package flatscangpu

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"needle/faissgo"
)

// encode is flatscangpu.cu's key of a hit (TileSource::key), restated for the host tests.
func encode(s float32, label int64, l2 bool) uint64 {
	if s == 0 {
		s = 0 // -0 ties with +0
	}
	u := math.Float32bits(s)
	if u&0x80000000 != 0 {
		u = ^u
	} else {
		u |= 0x80000000
	}
	if l2 {
		u = ^u
	}
	return uint64(u)<<32 | uint64(0xffffffff-uint32(label))
}

func TestDecodeInvertsEncode(t *testing.T) {
	for _, s := range []float32{0, 1, -1, 0.5, -3.25e-20, math.MaxFloat32, -math.MaxFloat32, float32(math.Inf(1)), float32(math.Inf(-1))} {
		for _, l2 := range []bool{false, true} {
			for _, label := range []int64{0, 1, 21015323, 0xfffffffe} {
				gs, gl := decode(encode(s, label, l2), l2)
				if gs != s || gl != label {
					t.Errorf("decode(encode(%g, %d, l2=%v)) = %g, %d", s, label, l2, gs, gl)
				}
			}
		}
	}
	if _, l := decode(0, false); l != -1 {
		t.Errorf("key 0 decodes to label %d", l)
	}
}

// deviceTopKeys is what the device hands the host for one shard: the best n keys of
// scores[first:first+len], sorted best first (better score, lower label), zero-padded to width.
func deviceTopKeys(scores []float32, first int64, n, width int, l2 bool) []uint64 {
	keys := make([]uint64, 0, len(scores))
	for i, s := range scores {
		if s == s {
			keys = append(keys, encode(s, first+int64(i), l2))
		}
	}
	slices.SortFunc(keys, func(a, b uint64) int { return cmp.Compare(b, a) })
	keys = keys[:min(n, len(keys))]
	return append(keys, make([]uint64, width-len(keys))...)
}

// TestFinishMatchesFAISS: on small-integer vectors (exact scores, many ties), the host half of
// the top-k (shard lists merged, then finish) returns what FAISS's IndexFlat search returns,
// ids and distances, for IP and L2, k from 1 to past the row count.
func TestFinishMatchesFAISS(t *testing.T) {
	const dim, nq = 3, 40
	rng := rand.New(rand.NewPCG(5, 6))
	ints := func(n int) []float32 {
		v := make([]float32, n*dim)
		for i := range v {
			v[i] = float32(rng.IntN(5))
		}
		return v
	}
	for _, n := range []int{2000, 9} {
		db, q := ints(n), ints(nq)
		for _, m := range []faissgo.Metric{faissgo.IP, faissgo.L2} {
			idx, err := faissgo.New(dim, "Flat", m)
			if err != nil {
				t.Fatal(err)
			}
			if err := idx.Add(db); err != nil {
				t.Fatal(err)
			}
			l2 := m == faissgo.L2
			for _, k := range []int{1, 2, 7, 64} {
				wd, wl := make([]float32, nq*k), make([]int64, nq*k)
				if err := idx.Search(q, k, wd, wl); err != nil {
					t.Fatal(err)
				}
				cands := Candidates(k, l2)
				for qi := range nq {
					scores := make([]float32, n)
					for j := range n {
						var s float32
						for c := range dim {
							x, y := q[qi*dim+c], db[j*dim+c]
							if l2 {
								s += (x - y) * (x - y)
							} else {
								s += x * y
							}
						}
						scores[j] = s
					}
					// Three shards of uneven size, as rows split over GPUs.
					cut1, cut2 := n/3, n/3+n/2
					lists := [][]uint64{
						deviceTopKeys(scores[:cut1], 0, cands, Width(cands), l2),
						deviceTopKeys(scores[cut1:cut2], int64(cut1), cands, Width(cands), l2),
						deviceTopKeys(scores[cut2:], int64(cut2), cands, Width(cands), l2),
					}
					keys := MergeShards(nil, lists, cands)
					gd, gl := make([]float32, k), make([]int64, k)
					Finish(keys, k, l2, gd, gl)
					if !slices.Equal(gl, wl[qi*k:(qi+1)*k]) || !slices.Equal(gd, wd[qi*k:(qi+1)*k]) {
						t.Fatalf("%v n=%d k=%d query %d:\n got %v %v\nFAISS %v %v", m, n, k, qi, gl, gd, wl[qi*k:(qi+1)*k], wd[qi*k:(qi+1)*k])
					}
				}
			}
			idx.Close()
		}
	}
}
