package byteview

import (
	"encoding/binary"
	"math"
	"testing"
)

// Float32s is the little-endian encoding of the values, and ReadFloat32s reads it back from
// any alignment.
func TestRoundTrip(t *testing.T) {
	x := []float32{0, -1.5, float32(math.Inf(1)), 3.25e-40, 65504}
	b := Float32s(x)
	for i, v := range x {
		if got := binary.LittleEndian.Uint32(b[4*i:]); got != math.Float32bits(v) {
			t.Fatalf("byte %d: %#x, want %#x", 4*i, got, math.Float32bits(v))
		}
	}
	shifted := append([]byte{7}, b...)
	back := make([]float32, len(x))
	ReadFloat32s(back, shifted[1:])
	for i := range x {
		if math.Float32bits(back[i]) != math.Float32bits(x[i]) {
			t.Fatalf("value %d: %g, want %g", i, back[i], x[i])
		}
	}
	if Float32s(nil) != nil {
		t.Fatal("Float32s(nil) is not nil")
	}
}
