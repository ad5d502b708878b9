package main

import (
	"bytes"
	"fmt"

	"needle/kernels/trainer/delta"
)

// Delta cases of `needle bench kernels` (ANCHORS.md §6): a 1 GiB bf16 tensor with 0.5%, 1%
// and 2% of its elements changed, the range of one RL step.
//   - encode reads old and new once: bytes = 2 x 1 GiB, against the read bandwidth.
//   - apply writes the changed elements into a copy of old, in place: bytes = the 1 GiB
//     tensor, so "GB/s" is how fast a tensor of that size is brought up to date and the
//     fraction compares it with reading the tensor once. Compare the wall time with
//     bench/delta_numpy.py's scatter on the same sizes.
const deltaBenchBytes = 1 << 30

var deltaBenchFractions = []float64{0.005, 0.01, 0.02}

func init() {
	for _, frac := range deltaBenchFractions {
		registerKernelCase(deltaEncodeCase(frac))
	}
	for _, frac := range deltaBenchFractions {
		registerKernelCase(deltaApplyCase(frac))
	}
}

// deltaPair returns a random bf16 tensor of deltaBenchBytes and a copy with about frac of its
// elements changed in their lowest mantissa bit (what a small optimizer step does to bf16),
// at pseudo-random gaps from a fixed xorshift stream.
func deltaPair(frac float64) (oldBits, newBits []byte) {
	oldBits = randomBF16(deltaBenchBytes/2, 1)
	newBits = bytes.Clone(oldBits)
	span := uint64(2/frac) - 1 // gaps uniform in [1, span]: mean 1/frac
	s := uint64(0x2545f4914f6cdd1d)
	for i := uint64(0); ; {
		i += 1 + xorshift(&s)%span
		if 2*i >= uint64(len(newBits)) {
			break
		}
		newBits[2*i] ^= 1
	}
	return oldBits, newBits
}

func deltaEncodeCase(frac float64) kernelCase {
	return kernelCase{
		name:  fmt.Sprintf("delta encode bf16 1GiB %.1f%% changed", 100*frac),
		bytes: 2 * deltaBenchBytes,
		elems: deltaBenchBytes / 2,
		prepare: func() (func(int) error, func(), error) {
			oldBits, newBits := deltaPair(frac)
			var s delta.Sparse
			run := func(threads int) error { return delta.Encode(&s, oldBits, newBits, 2, threads) }
			return run, func() { oldBits, newBits, s = nil, nil, delta.Sparse{} }, nil
		},
	}
}

func deltaApplyCase(frac float64) kernelCase {
	return kernelCase{
		name:  fmt.Sprintf("delta apply bf16 1GiB %.1f%% changed", 100*frac),
		bytes: deltaBenchBytes,
		elems: deltaBenchBytes / 2,
		prepare: func() (func(int) error, func(), error) {
			base, newBits := deltaPair(frac)
			var s delta.Sparse
			if err := delta.Encode(&s, base, newBits, 2, 1); err != nil {
				return nil, nil, err
			}
			newBits = nil
			// Every run writes the same entries: after the first, base already equals new,
			// which costs the scatter the same.
			run := func(threads int) error { return delta.Apply(base, &s, threads) }
			return run, func() { base, s = nil, delta.Sparse{} }, nil
		},
	}
}
