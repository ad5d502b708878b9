package synth

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// TestToBF16: rounding matches the nearest of the two bf16 neighbours, ties to the even one.
func TestToBF16(t *testing.T) {
	s := uint64(3)
	for range 100000 {
		f := math.Float32frombits(uint32(next(&s)))
		if f != f || math.IsInf(float64(f), 0) || math.Abs(float64(f)) > 1e38 {
			continue
		}
		lo := uint16(math.Float32bits(f) >> 16)
		up := lo + 1
		dLo := math.Abs(float64(f) - float64(math.Float32frombits(uint32(lo)<<16)))
		dUp := math.Abs(float64(f) - float64(math.Float32frombits(uint32(up)<<16)))
		want := lo
		if dUp < dLo || (dUp == dLo && up&1 == 0) {
			want = up
		}
		if got := toBF16(f); got != want {
			t.Fatalf("toBF16(%g) = %#x, want %#x", f, got, want)
		}
	}
}

// TestOptimizerVersions: a calibrated step changes about the asked fraction of a BF16 tensor,
// some of them in their high byte; other dtypes are untouched; versions are reproducible and
// independent of the threads that write them.
func TestOptimizerVersions(t *testing.T) {
	ts := []Tensor{T("w", "BF16", 1000, 1000), T("ids", "I64", 100)}
	o := Calibrated(5, 0.02)
	v0, hdr := Image(ts, 1)
	ids := bytes.Clone(v0[hdr+2000000:])
	o.Version(v0, 0, 3)
	v1 := bytes.Clone(v0)
	o.Version(v1, 1, 1)
	if !bytes.Equal(v1[hdr+2000000:], ids) {
		t.Fatal("the I64 tensor changed")
	}
	again := bytes.Clone(v0)
	o.Version(again, 1, 4)
	if !bytes.Equal(again, v1) {
		t.Fatal("a version depends on the threads that wrote it")
	}
	changed, high := 0, 0
	for i := hdr; i < hdr+2000000; i += 2 {
		a, b := binary.LittleEndian.Uint16(v0[i:]), binary.LittleEndian.Uint16(v1[i:])
		w := math.Float32frombits(uint32(a) << 16)
		if !(math.Abs(float64(w)) <= 0.0401) { // 0.04 rounded up to bf16
			t.Fatalf("bf16 weight %v at byte %d is not in [-0.0401, 0.0401]", w, i)
		}
		if a != b {
			changed++
			if a>>8 != b>>8 {
				high++
			}
		}
	}
	if changed < 17000 || changed > 23000 {
		t.Errorf("%d of 1e6 elements changed, want about 2%%", changed)
	}
	if high == 0 || high > changed/20 {
		t.Errorf("%d of %d changes are in the high byte, want some and under 5%%", high, changed)
	}
	t.Logf("lr %.3g: %d changed, %d in the high byte", o.LR, changed, high)
}
