package bench

import "testing"

// deltaPair changes about frac of the elements, each in its lowest mantissa bit only.
func TestDeltaPairFraction(t *testing.T) {
	for _, frac := range deltaBenchFractions {
		oldBits, newBits := deltaPair(1<<20, frac)
		if len(oldBits) != 1<<20 || len(newBits) != 1<<20 {
			t.Fatalf("sizes %d, %d", len(oldBits), len(newBits))
		}
		changed := 0
		for i := 0; i < len(oldBits); i += 2 {
			if oldBits[i+1] != newBits[i+1] || oldBits[i]^newBits[i] > 1 {
				t.Fatalf("element %d: more than the lowest bit changed", i/2)
			}
			if oldBits[i] != newBits[i] {
				changed++
			}
		}
		if got := float64(changed) / float64(len(oldBits)/2); got < 0.9*frac || got > 1.1*frac {
			t.Errorf("frac %v: %v of the elements changed", frac, got)
		}
	}
}
