package synth

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// TestStep: a step changes about the asked fraction of 2- and 4-byte elements (never others)
// and the same seeds give the same bytes; BF16 weights are small and finite.
func TestStep(t *testing.T) {
	ts := []Tensor{T("w", "BF16", 1000, 100), T("ids", "I64", 100)}
	img, hdr := Image(ts, 1)
	if again, _ := Image(ts, 1); !bytes.Equal(img, again) {
		t.Fatal("Image is not deterministic")
	}
	for i := hdr; i < hdr+200000; i += 2 {
		w := math.Float32frombits(uint32(binary.LittleEndian.Uint16(img[i:])) << 16)
		if !(math.Abs(float64(w)) <= 0.04) {
			t.Fatalf("bf16 weight %v at byte %d is not in [-0.04, 0.04]", w, i)
		}
	}
	next := Step(img, 0.01, 2)
	changed := 0
	for i := hdr; i < hdr+200000; i += 2 {
		if img[i] != next[i] || img[i+1] != next[i+1] {
			changed++
		}
	}
	if changed < 800 || changed > 1200 {
		t.Errorf("%d of 100000 elements changed, want about 1%%", changed)
	}
	if !bytes.Equal(img[hdr+200000:], next[hdr+200000:]) {
		t.Error("the I64 tensor changed")
	}
}
