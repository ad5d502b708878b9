package delta

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"needle/platform/cpu"
)

// pair returns old and new tensors of n elements where about frac of the elements differ
// in their bits; changes include NaN payload flips and 0.0 -> -0.0, which compare equal
// as floats but are different bits.
func pair(n, elemSize int, frac float64, seed uint64) (oldBits, newBits []byte) {
	r := rand.New(rand.NewPCG(seed, 7))
	oldBits = make([]byte, n*elemSize)
	for i := range oldBits {
		oldBits[i] = byte(r.Uint32())
	}
	newBits = bytes.Clone(oldBits)
	for i := range n {
		if r.Float64() >= frac {
			continue
		}
		e := newBits[i*elemSize : (i+1)*elemSize]
		switch i % 3 {
		case 0: // sign flip: +0.0 <-> -0.0 when the rest is zero
			e[elemSize-1] ^= 0x80
		case 1: // lowest mantissa bit: a NaN stays a NaN with another payload
			e[0] ^= 1
		default:
			e[r.IntN(elemSize)] ^= byte(1 + r.IntN(255))
		}
	}
	return oldBits, newBits
}

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
				oldBits, newBits := pair(n, es, frac, uint64(n))
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
					oldBits, newBits := pair(n, es, frac, uint64(n)+5)
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

func TestApplyRoundTrip(t *testing.T) {
	for _, f := range []Format{AstraFlow, Compact} {
		for _, es := range []int{2, 4} {
			for _, n := range sizes {
				for _, frac := range []float64{0, 0.005, 0.01, 0.02, 1} {
					oldBits, newBits := pair(n, es, frac, uint64(n)+3)
					var s Sparse
					if err := Encode(&s, oldBits, newBits, es, 2); err != nil {
						t.Fatal(err)
					}
					var rec bytes.Buffer
					if _, err := WriteRecord(&rec, f, &s, oldBits, newBits); err != nil {
						t.Fatal(err)
					}
					for _, threads := range []int{1, 2} {
						// Records are idempotent: one applied again (a resumed transfer) or over a
						// base it half changed (a kill mid-apply) gives the new tensor too.
						half := bytes.Clone(oldBits)
						copy(half[:len(half)/2], newBits)
						base := bytes.Clone(oldBits)
						for i, b := range [][]byte{base, base, half} {
							if err := ApplyRecord(b, es, f, rec.Bytes(), nil, threads); err != nil {
								t.Fatalf("%s es=%d n=%d frac=%v: %v", f, es, n, frac, err)
							}
							if !bytes.Equal(b, newBits) {
								t.Fatalf("%s es=%d n=%d frac=%v threads=%d: tensor %d applied differs from new", f, es, n, frac, threads, i)
							}
						}
					}
				}
			}
		}
	}
}

func TestApplyEveryLevel(t *testing.T) {
	oldBits, newBits := pair(5003, 2, 0.05, 1)
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
	oldBits, newBits := pair(300, 2, 0.2, 9)
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
		var rec bytes.Buffer
		if _, err := WriteRecord(&rec, AstraFlow, &wide, nil, nil); err != nil {
			t.Fatal(err)
		}
		if flags := binary.LittleEndian.Uint16(rec.Bytes()[10:]); flags != 1 {
			t.Fatalf("astraflow flags %d for 8-byte indices, want 1", flags)
		}
		parsed, err := ParseAstraFlow(rec.Bytes(), 1<<33, 2)
		if err != nil || !bytes.Equal(parsed.Indices, wide.Indices) {
			t.Fatalf("ParseAstraFlow of an 8-byte-index record: %v", err)
		}
		wide.Len = int64(first) + 200 // the last entries are now out of range
		if err := wide.checkIndices(l); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Fatalf("%s: out-of-range 8-byte index gave %v", l, err)
		}
	}
}

// TestAstraFlowLayout pins the header bytes to AstraFlow's struct.pack("<QHHi", nnz, 2, 0, 0).
func TestAstraFlowLayout(t *testing.T) {
	oldBits, newBits := []byte{1, 0, 2, 0, 3, 0}, []byte{1, 0, 9, 0, 3, 0}
	var s Sparse
	if err := Encode(&s, oldBits, newBits, 2, 1); err != nil {
		t.Fatal(err)
	}
	var rec bytes.Buffer
	if _, err := WriteRecord(&rec, AstraFlow, &s, oldBits, newBits); err != nil {
		t.Fatal(err)
	}
	want := []byte{1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9, 0}
	if !bytes.Equal(rec.Bytes(), want) {
		t.Fatalf("record % x, want % x", rec.Bytes(), want)
	}
}

func TestCompactFallsBackToDense(t *testing.T) {
	oldBits, newBits := pair(4096, 2, 1, 5)
	var s Sparse
	if err := Encode(&s, oldBits, newBits, 2, 1); err != nil {
		t.Fatal(err)
	}
	rec, err := appendCompact(nil, &s, oldBits, newBits)
	if err != nil {
		t.Fatal(err)
	}
	if rec[5] != compactDense || len(rec) != compactHdrLen+len(newBits) {
		t.Fatalf("100%% changed: kind %d, %d bytes; want dense of %d", rec[5], len(rec), compactHdrLen+len(newBits))
	}
	oldBits, newBits = pair(1<<16, 2, 0.01, 5)
	if err := Encode(&s, oldBits, newBits, 2, 1); err != nil {
		t.Fatal(err)
	}
	if rec, err = appendCompact(nil, &s, oldBits, newBits); err != nil {
		t.Fatal(err)
	}
	if rec[5] != compactSparse || rec[6] != 1 || len(rec) >= int(s.Count())*6 {
		t.Fatalf("1%% changed: kind %d width %d, %d bytes vs %d in astraflow", rec[5], rec[6], len(rec), s.Count()*6+16)
	}
}

func TestCompactGapEscapes(t *testing.T) {
	// Changes at 0, 255 (gap 254), 511 (gap 255 = one escape word + 0), 70000 (gap past u16).
	n := 70001
	oldBits := make([]byte, 2*n)
	newBits := bytes.Clone(oldBits)
	for _, i := range []int{0, 255, 511, 70000} {
		newBits[2*i] = 1
	}
	var s Sparse
	if err := Encode(&s, oldBits, newBits, 2, 1); err != nil {
		t.Fatal(err)
	}
	for _, version := range []int{1, 2} {
		for _, w := range []int{1, 2, 4} {
			rec := buildSparseCompact(t, &s, oldBits, version, w)
			base := bytes.Clone(oldBits)
			if err := ApplyRecord(base, 2, Compact, rec, nil, 1); err != nil || !bytes.Equal(base, newBits) {
				t.Fatalf("version %d gap width %d: %v", version, w, err)
			}
		}
	}
}

// buildSparseCompact writes s, the delta from oldBits, as a sparse compact record of version
// 1 (every plane) or 2 with gap width w, whatever width appendCompact would pick.
func buildSparseCompact(t testing.TB, s *Sparse, oldBits []byte, version, w int) []byte {
	t.Helper()
	low := lowBytes(version, s.ElemSize)
	payload := appendPlanes(appendGaps(nil, s, w), s, low)
	if version == 2 {
		payload = appendExceptions(payload, s, oldBits, low)
	}
	rec := putCompactHeader(nil, version, compactSparse, w, s.ElemSize, uint64(s.Len), uint64(s.Count()), uint64(len(payload)))
	return zenc().EncodeAll(payload, rec)
}

func TestBadRecordsLeaveBaseUntouched(t *testing.T) {
	oldBits, newBits := pair(1000, 2, 0.02, 11)
	var s Sparse
	if err := Encode(&s, oldBits, newBits, 2, 1); err != nil {
		t.Fatal(err)
	}
	var astra bytes.Buffer
	WriteRecord(&astra, AstraFlow, &s, oldBits, newBits)
	good := astra.Bytes()
	nnz := int(s.Count())
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	compact := buildSparseCompact(t, &s, oldBits, 1, 1)
	cmod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(compact)) }
	// v2 builds a version-2 record whose exceptions section is ex.
	v2 := func(ex ...byte) []byte {
		payload := append(appendPlanes(appendGaps(nil, &s, 1), &s, 1), ex...)
		return zenc().EncodeAll(payload, putCompactHeader(nil, 2, compactSparse, 1, 2, 1000, uint64(nnz), uint64(len(payload))))
	}
	cases := []struct {
		name string
		f    Format
		rec  []byte
		want string
	}{
		{"astraflow empty", AstraFlow, nil, "shorter than its 16-byte header"},
		{"astraflow truncated", AstraFlow, good[:len(good)-1], "after the header"},
		{"astraflow trailing", AstraFlow, append(bytes.Clone(good), 0), "after the header"},
		{"astraflow elem size", AstraFlow, mod(func(b []byte) []byte { b[8] = 4; return b }), "elem_size is 4"},
		{"astraflow flags", AstraFlow, mod(func(b []byte) []byte { b[10] = 2; return b }), "unknown bits"},
		{"astraflow reserved", AstraFlow, mod(func(b []byte) []byte { b[12] = 1; return b }), "reserved"},
		{"astraflow count", AstraFlow, mod(func(b []byte) []byte { b[0]--; return b }), "after the header"},
		{"astraflow nnz > n", AstraFlow, mod(func(b []byte) []byte { b[7] = 1; return b }), "exceeds"},
		{"astraflow out of range", AstraFlow, mod(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[16+4*(nnz-1):], 1000)
			return b
		}), "out of range"},
		{"astraflow not increasing", AstraFlow, mod(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[16+4:], binary.LittleEndian.Uint32(b[16:]))
			return b
		}), "not greater"},
		{"compact empty", Compact, nil, "shorter than its 32-byte header"},
		{"compact magic", Compact, cmod(func(b []byte) []byte { b[0] = 'X'; return b }), "magic"},
		{"compact version", Compact, cmod(func(b []byte) []byte { b[4] = 3; return b }), "version 3"},
		{"compact kind", Compact, cmod(func(b []byte) []byte { b[5] = 9; return b }), "kind 9"},
		{"compact width", Compact, cmod(func(b []byte) []byte { b[6] = 3; return b }), "gap width 3"},
		{"compact elem size", Compact, cmod(func(b []byte) []byte { b[7] = 4; return b }), "element size is 4"},
		{"compact len", Compact, cmod(func(b []byte) []byte { b[8]++; return b }), "for 1001 elements"},
		{"compact count", Compact, cmod(func(b []byte) []byte { b[16]++; return b }), "payload length"},
		{"compact truncated", Compact, compact[:len(compact)-3], "payload"},
		{"compact corrupt zstd", Compact, cmod(func(b []byte) []byte { b[len(b)/2+16] ^= 0xff; return b }), "payload"},
		{"compact exceptions trailing", Compact, v2(0, 0), "after the last exception"},
		{"compact exception past the end", Compact, v2(1, byte(nnz), 7), "past the last entry"},
		{"compact exceptions cut", Compact, v2(2, 0, 7), "is cut"},
		{"compact dense short", Compact, putCompactHeader(nil, compactVersion, compactDense, 0, 2, 1000, 0, 2000), "dense"},
	}
	for _, c := range cases {
		base := bytes.Clone(oldBits)
		err := ApplyRecord(base, 2, c.f, c.rec, nil, 1)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if !bytes.Equal(base, oldBits) {
			t.Errorf("%s: base changed", c.name)
		}
	}
}

func FuzzApplyRecord(f *testing.F) {
	oldBits, newBits := pair(300, 2, 0.05, 13)
	var s Sparse
	if err := Encode(&s, oldBits, newBits, 2, 1); err != nil {
		f.Fatal(err)
	}
	var astra bytes.Buffer
	WriteRecord(&astra, AstraFlow, &s, oldBits, newBits)
	compact, _ := appendCompact(nil, &s, oldBits, newBits)
	f.Add(byte(0), astra.Bytes())
	f.Add(byte(1), compact)
	f.Add(byte(1), buildSparseCompact(f, &s, oldBits, 1, 1))
	f.Add(byte(1), buildSparseCompact(f, &s, oldBits, 2, 2))
	f.Add(byte(1), putCompactHeader(nil, compactVersion, compactDense, 0, 2, 300, 0, 600))
	f.Add(byte(0), astra.Bytes()[:20])
	f.Fuzz(func(t *testing.T, format byte, rec []byte) {
		base := bytes.Clone(oldBits)
		err := ApplyRecord(base, 2, Format(format%2), rec, nil, 1)
		if err != nil && !bytes.Equal(base, oldBits) {
			t.Fatalf("error %v and the base changed", err)
		}
	})
}

// TestCompactKeepsHighBytes: on bf16 weights of a trained model's spread with 1% changed by
// 1-3 units (carries into the high byte included), a version-2 record stores the low bytes
// and the few changed high bytes: at most 0.4x AstraFlow's bytes (version 1, every plane,
// took 0.50x), and it applies to the new tensor.
func TestCompactKeepsHighBytes(t *testing.T) {
	const n = 1 << 20
	r := rand.New(rand.NewPCG(3, 4))
	oldBits := make([]byte, 2*n)
	for i := range n {
		w := (r.Float32() + r.Float32() - 1) * 0.04
		binary.LittleEndian.PutUint16(oldBits[2*i:], uint16(math.Float32bits(w)>>16))
	}
	newBits := bytes.Clone(oldBits)
	for i := r.IntN(199); i < n; i += 1 + r.IntN(199) {
		v, d := binary.LittleEndian.Uint16(newBits[2*i:]), uint16(1+r.IntN(3))
		if r.IntN(2) == 0 {
			v += d
		} else {
			v -= d
		}
		binary.LittleEndian.PutUint16(newBits[2*i:], v)
	}
	var s Sparse
	if err := Encode(&s, oldBits, newBits, 2, 1); err != nil {
		t.Fatal(err)
	}
	var rec bytes.Buffer
	if _, err := WriteRecord(&rec, Compact, &s, oldBits, newBits); err != nil {
		t.Fatal(err)
	}
	astra := 16 + 6*s.Count()
	v1 := buildSparseCompact(t, &s, oldBits, 1, 1)
	t.Logf("%d changed: compact v2 %d bytes = %.3fx AstraFlow's %d (v1 %.3fx)", s.Count(), rec.Len(),
		float64(rec.Len())/float64(astra), astra, float64(len(v1))/float64(astra))
	if rec.Bytes()[4] != 2 || float64(rec.Len()) > 0.4*float64(astra) {
		t.Fatalf("version %d record of %d bytes: more than 0.4x AstraFlow's %d", rec.Bytes()[4], rec.Len(), astra)
	}
	base := bytes.Clone(oldBits)
	if err := ApplyRecord(base, 2, Compact, rec.Bytes(), nil, 1); err != nil || !bytes.Equal(base, newBits) {
		t.Fatalf("apply: %v", err)
	}
}
