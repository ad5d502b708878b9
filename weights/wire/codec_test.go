package wire

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"needle/kernels/trainer/delta"
	"needle/testkit/weightstest"
)

// sizes are tensor lengths around the kernels' vector widths and past several.
var sizes = []int{0, 1, 2, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000, 4099, 70001}

// encodeRecord returns the record of the delta from oldBits to newBits in format f.
func encodeRecord(t testing.TB, f Format, oldBits, newBits []byte, es int) (delta.Sparse, []byte) {
	t.Helper()
	var s delta.Sparse
	if err := delta.Encode(&s, oldBits, newBits, es, 2); err != nil {
		t.Fatal(err)
	}
	rec, err := AppendRecord(nil, f, &s, oldBits, newBits, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, rec
}

// TestApplyRoundTrip: every format's record rebuilds the new tensor, again when applied twice
// or over a base it half changed (records are idempotent).
func TestApplyRoundTrip(t *testing.T) {
	for _, f := range []Format{AstraFlow, Packed} {
		for _, es := range []int{2, 4} {
			for _, n := range sizes {
				for _, frac := range []float64{0, 0.005, 0.01, 0.02, 1} {
					oldBits, newBits := weightstest.Pair(n, es, frac, uint64(n)+3)
					s, rec := encodeRecord(t, f, oldBits, newBits, es)
					for _, threads := range []int{1, 2} {
						// Records are idempotent: one applied again (a resumed transfer) or over a
						// base it half changed (a kill mid-apply) gives the new tensor too.
						half := bytes.Clone(oldBits)
						copy(half[:len(half)/2], newBits)
						base := bytes.Clone(oldBits)
						for i, b := range [][]byte{base, base, half} {
							if changed, err := ApplyRecord(b, es, f, rec, nil, threads); err != nil || changed != s.Count() {
								t.Fatalf("%s es=%d n=%d frac=%v: %d changed of %d, %v", f, es, n, frac, changed, s.Count(), err)
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

// TestAstraFlowWideIndices: a record of a tensor past 2^32 elements carries u64 indices and says
// so in its flags (no tensor of 2^32 elements is allocated: the entries are made by hand).
func TestAstraFlowWideIndices(t *testing.T) {
	wide := delta.Sparse{Len: 1 << 33, ElemSize: 2, IndexSize: 8}
	for k := range uint64(5) {
		wide.Indices = binary.LittleEndian.AppendUint64(wide.Indices, math.MaxUint32-2+3*k)
		wide.Values = append(wide.Values, byte(k), 0)
	}
	rec, err := AppendRecord(nil, AstraFlow, &wide, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if flags := binary.LittleEndian.Uint16(rec[10:]); flags != 1 {
		t.Fatalf("astraflow flags %d for 8-byte indices, want 1", flags)
	}
	parsed, err := ParseAstraFlow(rec, 1<<33, 2)
	if err != nil || !bytes.Equal(parsed.Indices, wide.Indices) || !bytes.Equal(parsed.Values, wide.Values) {
		t.Fatalf("ParseAstraFlow of an 8-byte-index record: %v", err)
	}
}

// TestAstraFlowFormat pins the header bytes to AstraFlow's struct.pack("<QHHi", nnz, 2, 0, 0).
func TestAstraFlowFormat(t *testing.T) {
	_, rec := encodeRecord(t, AstraFlow, []byte{1, 0, 2, 0, 3, 0}, []byte{1, 0, 9, 0, 3, 0}, 2)
	want := []byte{1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9, 0}
	if !bytes.Equal(rec, want) {
		t.Fatalf("record % x, want % x", rec, want)
	}
}

func TestPackedFallsBackToDense(t *testing.T) {
	oldBits, newBits := weightstest.Pair(4096, 2, 1, 5)
	var s delta.Sparse
	if err := delta.Encode(&s, oldBits, newBits, 2, 1); err != nil {
		t.Fatal(err)
	}
	rec, err := appendPacked(nil, &s, oldBits, newBits, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rec[5] != packedDense || len(rec) != packedHdrLen+len(newBits) {
		t.Fatalf("100%% changed: kind %d, %d bytes; want dense of %d", rec[5], len(rec), packedHdrLen+len(newBits))
	}
	oldBits, newBits = weightstest.Pair(1<<16, 2, 0.01, 5)
	if err := delta.Encode(&s, oldBits, newBits, 2, 1); err != nil {
		t.Fatal(err)
	}
	if rec, err = appendPacked(nil, &s, oldBits, newBits, nil); err != nil {
		t.Fatal(err)
	}
	if rec[5] != packedSparse || rec[6] != 1 || len(rec) >= int(s.Count())*6 {
		t.Fatalf("1%% changed: kind %d width %d, %d bytes vs %d in astraflow", rec[5], rec[6], len(rec), s.Count()*6+16)
	}
}

func TestPackedGapEscapes(t *testing.T) {
	// Changes at 0, 255 (gap 254), 511 (gap 255 = one escape word + 0), 70000 (gap past u16).
	n := 70001
	oldBits := make([]byte, 2*n)
	newBits := bytes.Clone(oldBits)
	for _, i := range []int{0, 255, 511, 70000} {
		newBits[2*i] = 1
	}
	var s delta.Sparse
	if err := delta.Encode(&s, oldBits, newBits, 2, 1); err != nil {
		t.Fatal(err)
	}
	for _, version := range []int{1, 2} {
		for _, w := range []int{1, 2, 4} {
			rec := buildSparsePacked(t, &s, oldBits, version, w)
			base := bytes.Clone(oldBits)
			if _, err := ApplyRecord(base, 2, Packed, rec, nil, 1); err != nil || !bytes.Equal(base, newBits) {
				t.Fatalf("version %d gap width %d: %v", version, w, err)
			}
		}
	}
}

// buildSparsePacked writes s, the delta from oldBits, as a sparse packed record of version
// 1 (every plane) or 2 with gap width w, whatever width appendPacked would pick.
func buildSparsePacked(t testing.TB, s *delta.Sparse, oldBits []byte, version, w int) []byte {
	t.Helper()
	low := lowBytes(version, s.ElemSize)
	payload, _, err := delta.AppendPackedPayload(nil, s, oldBits, w, low, version == 2)
	if err != nil {
		t.Fatal(err)
	}
	rec := putPackedHeader(nil, version, packedSparse, w, s.ElemSize, uint64(s.Len), uint64(s.Count()), uint64(len(payload)))
	return zenc().EncodeAll(payload, rec)
}

func TestBadRecordsLeaveBaseUntouched(t *testing.T) {
	oldBits, newBits := weightstest.Pair(1000, 2, 0.02, 11)
	s, good := encodeRecord(t, AstraFlow, oldBits, newBits, 2)
	nnz := int(s.Count())
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	packed := buildSparsePacked(t, &s, oldBits, 1, 1)
	cmod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(packed)) }
	// v2 builds a version-2 record whose exceptions section is ex.
	v2 := func(ex ...byte) []byte {
		payload, _, err := delta.AppendPackedPayload(nil, &s, oldBits, 1, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		payload = append(payload, ex...)
		return zenc().EncodeAll(payload, putPackedHeader(nil, 2, packedSparse, 1, 2, 1000, uint64(nnz), uint64(len(payload))))
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
		{"packed empty", Packed, nil, "shorter than its 32-byte header"},
		{"packed magic", Packed, cmod(func(b []byte) []byte { b[0] = 'X'; return b }), "magic"},
		{"packed version", Packed, cmod(func(b []byte) []byte { b[4] = 3; return b }), "version 3"},
		{"packed kind", Packed, cmod(func(b []byte) []byte { b[5] = 9; return b }), "kind 9"},
		{"packed width", Packed, cmod(func(b []byte) []byte { b[6] = 3; return b }), "gap width 3"},
		{"packed elem size", Packed, cmod(func(b []byte) []byte { b[7] = 4; return b }), "element size is 4"},
		{"packed len", Packed, cmod(func(b []byte) []byte { b[8]++; return b }), "for 1001 elements"},
		{"packed count", Packed, cmod(func(b []byte) []byte { b[16]++; return b }), "payload length"},
		{"packed truncated", Packed, packed[:len(packed)-3], "payload"},
		{"packed corrupt zstd", Packed, cmod(func(b []byte) []byte { b[len(b)/2+16] ^= 0xff; return b }), "payload"},
		{"packed exceptions trailing", Packed, v2(0, 0), "after the last exception"},
		{"packed exception past the end", Packed, v2(1, byte(nnz), 7), "past the last entry"},
		{"packed exceptions cut", Packed, v2(2, 0, 7), "is cut"},
		{"packed dense short", Packed, putPackedHeader(nil, packedVersion, packedDense, 0, 2, 1000, 0, 2000), "dense"},
	}
	for _, c := range cases {
		base := bytes.Clone(oldBits)
		_, err := ApplyRecord(base, 2, c.f, c.rec, nil, 1)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if !bytes.Equal(base, oldBits) {
			t.Errorf("%s: base changed", c.name)
		}
	}
}

func FuzzApplyRecord(f *testing.F) {
	oldBits, newBits := weightstest.Pair(300, 2, 0.05, 13)
	s, astra := encodeRecord(f, AstraFlow, oldBits, newBits, 2)
	packed, _ := appendPacked(nil, &s, oldBits, newBits, nil)
	f.Add(byte(0), astra)
	f.Add(byte(1), packed)
	f.Add(byte(1), buildSparsePacked(f, &s, oldBits, 1, 1))
	f.Add(byte(1), buildSparsePacked(f, &s, oldBits, 2, 2))
	f.Add(byte(1), putPackedHeader(nil, packedVersion, packedDense, 0, 2, 300, 0, 600))
	f.Add(byte(0), astra[:20])
	f.Fuzz(func(t *testing.T, format byte, rec []byte) {
		base := bytes.Clone(oldBits)
		_, err := ApplyRecord(base, 2, Format(format%2), rec, nil, 1)
		if err != nil && !bytes.Equal(base, oldBits) {
			t.Fatalf("error %v and the base changed", err)
		}
	})
}

// TestPackedKeepsHighBytes: on bf16 weights of a trained model's spread with 1% changed by
// 1-3 units (carries into the high byte included), a version-2 record stores the low bytes
// and the few changed high bytes: at most 0.4x AstraFlow's bytes (version 1, every plane,
// took 0.50x), and it applies to the new tensor.
func TestPackedKeepsHighBytes(t *testing.T) {
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
	s, rec := encodeRecord(t, Packed, oldBits, newBits, 2)
	astra := 16 + 6*s.Count()
	v1 := buildSparsePacked(t, &s, oldBits, 1, 1)
	t.Logf("%d changed: packed v2 %d bytes = %.3fx AstraFlow's %d (v1 %.3fx)", s.Count(), len(rec),
		float64(len(rec))/float64(astra), astra, float64(len(v1))/float64(astra))
	if rec[4] != 2 || float64(len(rec)) > 0.4*float64(astra) {
		t.Fatalf("version %d record of %d bytes: more than 0.4x AstraFlow's %d", rec[4], len(rec), astra)
	}
	base := bytes.Clone(oldBits)
	if _, err := ApplyRecord(base, 2, Packed, rec, nil, 1); err != nil || !bytes.Equal(base, newBits) {
		t.Fatalf("apply: %v", err)
	}
}
