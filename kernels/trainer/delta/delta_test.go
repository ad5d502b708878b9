package delta

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"needle/platform/cpu"
	"needle/testkit/weightstest"
)

// naive is the Go oracle for the C reference itself.
func naive(oldBits, newBits []byte, elemSize int) (idx []uint64, vals []byte) {
	for i := 0; i < len(oldBits); i += elemSize {
		if !bytes.Equal(oldBits[i:i+elemSize], newBits[i:i+elemSize]) {
			idx = append(idx, uint64(i/elemSize))
			vals = append(vals, newBits[i:i+elemSize]...)
		}
	}
	return idx, vals
}

var sizes = []int{0, 1, 2, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000, 4099, 70001}

func TestEncodeMatchesReference(t *testing.T) {
	for _, es := range []int{2, 4} {
		for _, n := range sizes {
			for _, frac := range []float64{0, 0.01, 0.3, 1} {
				oldBits, newBits := weightstest.Pair(n, es, frac, uint64(n))
				wantIdx, wantVals := naive(oldBits, newBits, es)
				var ref Sparse
				if err := encode(cpu.Ref, &ref, oldBits, newBits, es, 1); err != nil {
					t.Fatal(err)
				}
				if ref.Count() != int64(len(wantIdx)) || !bytes.Equal(ref.Values, wantVals) {
					t.Fatalf("es=%d n=%d frac=%v: reference has %d entries, naive %d", es, n, frac, ref.Count(), len(wantIdx))
				}
				for k, g := range wantIdx {
					if ref.Index(int64(k)) != g {
						t.Fatalf("es=%d n=%d: reference index %d = %d, want %d", es, n, k, ref.Index(int64(k)), g)
					}
				}
				for _, l := range cpu.LevelsUpTo(cpu.AVX512) {
					for _, threads := range []int{1, 2, 3} {
						var got Sparse
						if err := encode(l, &got, oldBits, newBits, es, threads); err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(got.Indices, ref.Indices) || !bytes.Equal(got.Values, ref.Values) || got.Len != ref.Len || got.IndexSize != ref.IndexSize {
							t.Fatalf("%s threads=%d es=%d n=%d frac=%v: %d entries, reference %d", l, threads, es, n, frac, got.Count(), ref.Count())
						}
					}
				}
			}
		}
	}
}

// TestEncodeStaysInRoom gives every level outputs with room for exactly n entries, followed by
// guard bytes: the scratch entries a level writes past the last one (delta_vec.h) must stay
// in that room, for both index sizes.
func TestEncodeStaysInRoom(t *testing.T) {
	const guard = 256
	for _, es := range []int{2, 4} {
		for _, is := range []int{4, 8} {
			for _, n := range sizes {
				for _, frac := range []float64{0, 0.02, 0.5, 1} {
					oldBits, newBits := weightstest.Pair(n, es, frac, uint64(n)+5)
					for _, l := range cpu.LevelsUpTo(cpu.AVX512) {
						idx, vals := make([]byte, n*is+guard), make([]byte, n*es+guard)
						s := Sparse{Len: int64(n), ElemSize: es, IndexSize: is, Indices: idx[: 0 : n*is], Values: vals[: 0 : n*es]}
						if err := encodeChunk(l, &s, oldBits, newBits, 0); err != nil {
							t.Fatal(err)
						}
						if bytes.Count(idx[n*is:], []byte{0}) != guard || bytes.Count(vals[n*es:], []byte{0}) != guard {
							t.Fatalf("%s es=%d is=%d n=%d frac=%v: encode wrote past the room for %d entries", l, es, is, n, frac, n)
						}
					}
				}
			}
		}
	}
}

func TestFloatEqualBitsDiffer(t *testing.T) {
	negZero, nan1, nan2 := math.Float32bits(float32(math.Copysign(0, -1))), uint32(0x7fc00001), uint32(0x7fc00002)
	oldBits := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 0), nan1)
	newBits := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, negZero), nan2)
	for _, l := range cpu.LevelsUpTo(cpu.AVX512) {
		var s Sparse
		if err := encode(l, &s, oldBits, newBits, 4, 1); err != nil {
			t.Fatal(err)
		}
		if s.Count() != 2 {
			t.Fatalf("%s: %d changes between {0, NaN1} and {-0, NaN2}, want 2", l, s.Count())
		}
	}
}

// TestApplyRoundTrip: Apply rebuilds the new tensor, again when applied twice (idempotent) and
// over a base it half changed; ApplyLow writes the low half of each value and leaves the rest.
func TestApplyRoundTrip(t *testing.T) {
	for _, es := range []int{2, 4} {
		for _, n := range sizes {
			for _, frac := range []float64{0, 0.005, 0.01, 0.02, 1} {
				oldBits, newBits := weightstest.Pair(n, es, frac, uint64(n)+3)
				var s Sparse
				if err := Encode(&s, oldBits, newBits, es, 2); err != nil {
					t.Fatal(err)
				}
				for _, threads := range []int{1, 2} {
					half := bytes.Clone(oldBits)
					copy(half[:len(half)/2], newBits)
					base := bytes.Clone(oldBits)
					for i, b := range [][]byte{base, base, half} {
						if err := Apply(b, &s, threads); err != nil {
							t.Fatalf("es=%d n=%d frac=%v: %v", es, n, frac, err)
						}
						if !bytes.Equal(b, newBits) {
							t.Fatalf("es=%d n=%d frac=%v threads=%d: tensor %d applied differs from new", es, n, frac, threads, i)
						}
					}
					low, h := bytes.Clone(oldBits), es/2
					if err := ApplyLow(low, &s, h, threads); err != nil {
						t.Fatal(err)
					}
					for i := 0; i < len(low); i += es {
						if !bytes.Equal(low[i:i+h], newBits[i:i+h]) || !bytes.Equal(low[i+h:i+es], oldBits[i+h:i+es]) {
							t.Fatalf("es=%d n=%d: ApplyLow of %d bytes gave element %d = % x (old % x, new % x)", es, n, h, i/es, low[i:i+es], oldBits[i:i+es], newBits[i:i+es])
						}
					}
				}
			}
		}
	}
	var s Sparse
	if err := Encode(&s, []byte{1, 2}, []byte{3, 4}, 2, 1); err != nil {
		t.Fatal(err)
	}
	for _, nb := range []int{0, 3} {
		if err := ApplyLow(make([]byte, 2), &s, nb, 1); err == nil {
			t.Fatalf("ApplyLow of %d bytes of 2-byte values was accepted", nb)
		}
	}
}

func TestApplyEveryLevel(t *testing.T) {
	oldBits, newBits := weightstest.Pair(5003, 2, 0.05, 1)
	var s Sparse
	if err := encode(cpu.Ref, &s, oldBits, newBits, 2, 1); err != nil {
		t.Fatal(err)
	}
	for _, l := range cpu.LevelsUpTo(cpu.AVX512) {
		if err := s.check(l, len(oldBits)); err != nil {
			t.Fatalf("%s rejects a good delta: %v", l, err)
		}
		bad := s
		bad.Indices = bytes.Clone(s.Indices)
		binary.LittleEndian.PutUint32(bad.Indices[4*100:], uint32(bad.Index(99))) // repeat entry 99
		if err := bad.check(l, len(oldBits)); err == nil || !strings.Contains(err.Error(), "entry 100") {
			t.Fatalf("%s: repeated index gave %v, want an error at entry 100", l, err)
		}
	}
}

// TestIndexWidthPast2to32 checks index width selection and 8-byte indices without
// allocating a tensor of 2^32 elements: only the numbering (first) is past 2^32.
func TestIndexWidthPast2to32(t *testing.T) {
	if IndexSizeFor(math.MaxUint32) != 4 || IndexSizeFor(math.MaxUint32+1) != 8 {
		t.Fatalf("IndexSizeFor: %d at 2^32-1, %d at 2^32", IndexSizeFor(math.MaxUint32), IndexSizeFor(math.MaxUint32+1))
	}
	oldBits, newBits := weightstest.Pair(300, 2, 0.2, 9)
	first := uint64(math.MaxUint32 - 100)
	for _, l := range cpu.LevelsUpTo(cpu.AVX512) {
		narrow := Sparse{ElemSize: 2, IndexSize: 4, Indices: make([]byte, 0, 300*4), Values: make([]byte, 0, 600)}
		if err := encodeChunk(l, &narrow, oldBits, newBits, first); err == nil || !strings.Contains(err.Error(), "4-byte index") {
			t.Fatalf("%s: indices past 2^32 in 4 bytes gave %v", l, err)
		}
		wide := Sparse{Len: 1 << 33, ElemSize: 2, IndexSize: 8, Indices: make([]byte, 0, 300*8), Values: make([]byte, 0, 600)}
		if err := encodeChunk(l, &wide, oldBits, newBits, first); err != nil {
			t.Fatal(err)
		}
		wantIdx, _ := naive(oldBits, newBits, 2)
		for k, g := range wantIdx {
			if wide.Index(int64(k)) != first+g {
				t.Fatalf("%s: entry %d = %d, want %d", l, k, wide.Index(int64(k)), first+g)
			}
		}
		if err := wide.checkIndices(l); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		wide.Len = int64(first) + 200 // the last entries are now out of range
		if err := wide.checkIndices(l); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Fatalf("%s: out-of-range 8-byte index gave %v", l, err)
		}
	}
}

// naiveGapCosts and naivePackedPayload restate the packed payload (weights/wire/codec.go) in
// Go, entry by entry: the oracle of nl_delta_packed_payload.
func naiveGapCosts(idx []uint64) [3]uint64 {
	var c [3]uint64
	for k, w := range []uint64{1, 2, 4} {
		m, next := uint64(1)<<(8*w)-1, uint64(0)
		for _, i := range idx {
			c[k] += w * ((i-next)/m + 1)
			next = i + 1
		}
	}
	return c
}

func naivePackedPayload(idx []uint64, vals, oldBits []byte, es, width, planes int, exceptions bool) []byte {
	var out []byte
	m, next := uint64(1)<<(8*width)-1, uint64(0)
	for _, i := range idx {
		g := i - next
		next = i + 1
		for ; g >= m; g -= m {
			out = binary.LittleEndian.AppendUint64(out, m)[:len(out)+width]
		}
		out = binary.LittleEndian.AppendUint64(out, g)[:len(out)+width]
	}
	for b := range planes {
		for k := range idx {
			out = append(out, vals[k*es+b])
		}
	}
	if !exceptions {
		return out
	}
	var ex []byte
	count, prev := 0, -1
	for k, i := range idx {
		v := vals[k*es+planes : (k+1)*es]
		if !bytes.Equal(v, oldBits[int(i)*es+planes:(int(i)+1)*es]) {
			ex = append(binary.AppendUvarint(ex, uint64(k-prev-1)), v...)
			prev, count = k, count+1
		}
	}
	return append(binary.AppendUvarint(out, uint64(count)), ex...)
}

// TestPackedPayloadMatchesNaive: every width, plane count and index size, with and without
// exceptions, on changes from none to all and gaps past each width's escape word; the payload
// is written in place after dst's bytes, which stay.
func TestPackedPayloadMatchesNaive(t *testing.T) {
	for _, es := range []int{2, 4} {
		for _, n := range append(sizes, 300000) {
			for _, frac := range []float64{0, 0.0001, 0.01, 0.3, 1} {
				oldBits, newBits := weightstest.Pair(n, es, frac, uint64(n)+7)
				// Exceptions: every 5th change reaches the high byte. Gaps of exactly one escape
				// word (255 after element 0, 65535 between multiples of 65536) where nothing else
				// changed.
				changed, _ := naive(oldBits, newBits, es)
				for k := 0; k < len(changed); k += 5 {
					newBits[int(changed[k])*es+es-1] ^= 0x40
				}
				for i := 0; i < n; i += 65536 {
					newBits[i*es] ^= 1
				}
				if n > 256 {
					newBits[256*es] ^= 1
				}
				wantIdx, vals := naive(oldBits, newBits, es)
				for _, is := range []int{4, 8} {
					s := Sparse{Len: int64(n), ElemSize: es, IndexSize: is, Values: vals}
					for _, i := range wantIdx {
						s.Indices = binary.LittleEndian.AppendUint64(s.Indices, i)[:len(s.Indices)+is]
					}
					costs := naiveGapCosts(wantIdx)
					shortest := 0
					for w := range costs {
						if costs[w] < costs[shortest] {
							shortest = w
						}
					}
					for _, width := range []int{0, 1, 2, 4} {
						want := PayloadLayout{Width: width}
						if width == 0 {
							want.Width = 1 << shortest
						}
						want.GapBytes = int64(costs[map[int]int{1: 0, 2: 1, 4: 2}[want.Width]])
						for planes := 1; planes <= es; planes++ {
							for _, ex := range []bool{false, true} {
								got, layout, err := AppendPackedPayload([]byte("head"), &s, oldBits, width, planes, ex)
								if err != nil {
									t.Fatal(err)
								}
								wantBytes := naivePackedPayload(wantIdx, vals, oldBits, es, want.Width, planes, ex)
								if string(got[:4]) != "head" || !bytes.Equal(got[4:], wantBytes) || layout != want {
									t.Fatalf("es=%d n=%d frac=%v is=%d width=%d planes=%d exceptions=%v: %d bytes, %+v; want %d, %+v", es, n, frac, is, width, planes, ex, len(got)-4, layout, len(wantBytes), want)
								}
							}
						}
					}
				}
			}
		}
	}
}

func TestPackedPayloadRefusesBadArguments(t *testing.T) {
	oldBits, newBits := weightstest.Pair(100, 2, 0.1, 1)
	var s Sparse
	if err := Encode(&s, oldBits, newBits, 2, 1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		width, planes int
		old           []byte
		want          string
	}{{3, 1, oldBits, "gap width 3"}, {-1, 1, oldBits, "gap width -1"}, {1, 0, oldBits, "0 byte planes"}, {1, 3, oldBits, "3 byte planes"},
		{1, 1, oldBits[:100], "tensor has 100 bytes"}} {
		if _, _, err := AppendPackedPayload(nil, &s, c.old, c.width, c.planes, true); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("width %d planes %d old of %d bytes: error %v, want %q", c.width, c.planes, len(c.old), err, c.want)
		}
	}
}
