package bm25

import "testing"

// TestLengthBytes: Lucene's SmallFloat.intToByte4 keeps lengths below 24 exact and rounds
// longer ones down to 4 significant bits, and the table is monotonic.
func TestLengthBytes(t *testing.T) {
	for _, c := range []struct {
		n    uint32
		b    byte
		back uint32
	}{{0, 0, 0}, {23, 23, 23}, {24, 24, 24}, {25, 25, 25}, {40, 40, 40}, {41, 40, 40}, {100, 57, 96}, {1<<31 - 1, 255, 2013265944}} {
		if b := lengthToByte(c.n); b != c.b || byteToLength(b) != c.back {
			t.Errorf("length %d: byte %d -> %d, want byte %d -> %d", c.n, b, byteToLength(b), c.b, c.back)
		}
	}
	for b := 1; b < 256; b++ {
		if byteToLength(byte(b)) <= byteToLength(byte(b-1)) {
			t.Fatalf("byte %d decodes to %d, not above byte %d's %d", b, byteToLength(byte(b)), b-1, byteToLength(byte(b-1)))
		}
		if lengthToByte(byteToLength(byte(b))) != byte(b) {
			t.Fatalf("byte %d does not round-trip", b)
		}
	}
}
