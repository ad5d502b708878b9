// Package weightstest makes the raw tensors that the delta kernels' and the record codec's
// tests diff (Pair). The model versions that tests publish are bench/synth's (Image, Step,
// Optimizer), which `needle bench weights` publishes too.
package weightstest

import (
	"bytes"
	"math/rand/v2"
)

// Pair returns old and new tensors of n elements of elemSize bytes where about frac of the
// elements differ in their bits, seeded; changes include NaN payload flips and 0.0 -> -0.0,
// which compare equal as floats but are different bits, and changes of any byte.
func Pair(n, elemSize int, frac float64, seed uint64) (oldBits, newBits []byte) {
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
