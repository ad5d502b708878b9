package bench

import (
	"fmt"

	"needle/kernels/trainer/delta"
)

// Delta cases of `needle bench kernels`: a 1 GiB bf16 tensor with 0.5%, 1% and 2% of its
// elements changed, the range of one RL step.
//   - encode reads old and new once: bytes = 2 x the tensor, against the read bandwidth.
//   - apply writes the changed elements into a copy of old, in place: bytes = the tensor, so
//     "GB/s" is how fast a tensor of that size is brought up to date and the fraction
//     compares it with reading the tensor once. Compare the wall time with
//     bench/delta_numpy.py's scatter on the same sizes.
const deltaBenchBytes = 1 << 30

var deltaBenchFractions = []float64{0.005, 0.01, 0.02}

// deltaCases returns the encode cases, then the apply cases, on a tensor of size bytes.
func deltaCases(size int64) []kernelCase {
	var cases []kernelCase
	for _, frac := range deltaBenchFractions {
		cases = append(cases, deltaEncodeCase(size, frac))
	}
	for _, frac := range deltaBenchFractions {
		cases = append(cases, deltaApplyCase(size, frac))
	}
	return cases
}

// sizeName is size in whole GiB, or in MiB below 1 GiB (the small tensors of tests).
func sizeName(size int64) string {
	if size >= 1<<30 {
		return fmt.Sprintf("%dGiB", size>>30)
	}
	return fmt.Sprintf("%dMiB", size>>20)
}

// deltaGap is the room between the old and new tensors of deltaPair: 37 pages, so they are not a
// multiple of 256 MiB apart, as two 1 GiB allocations in a row are. Two input streams that far
// apart contend for the same DRAM banks (Zen 4: encode at 15-17 GB/s per CPU-s, 23-28 at other
// distances), a layout the tensors of a checkpoint rarely have; docs/delta.md says so.
const deltaGap = 37 << 12

// deltaPair returns a random bf16 tensor of size bytes and a copy with about frac of its
// elements changed in their lowest mantissa bit (what a small optimizer step does to bf16),
// at pseudo-random gaps from a fixed xorshift stream. Both lie in one allocation (deltaGap).
func deltaPair(size int64, frac float64) (oldBits, newBits []byte) {
	buf := make([]byte, 2*size+deltaGap)
	oldBits = randomBF16(buf[:size:size], 1)
	newBits = buf[size+deltaGap:]
	copy(newBits, oldBits)
	maxGap := uint64(2/frac) - 1 // gaps uniform in [1, maxGap]: mean 1/frac
	s := uint64(0x2545f4914f6cdd1d)
	for i := uint64(0); ; {
		i += 1 + xorshift(&s)%maxGap
		if 2*i >= uint64(len(newBits)) {
			break
		}
		newBits[2*i] ^= 1
	}
	return oldBits, newBits
}

func deltaEncodeCase(size int64, frac float64) kernelCase {
	return kernelCase{
		name:  fmt.Sprintf("delta encode bf16 %s %.1f%% changed", sizeName(size), 100*frac),
		bytes: 2 * size,
		elems: size / 2,
		prepare: func() (func(int) error, func(), error) {
			oldBits, newBits := deltaPair(size, frac)
			var s delta.Sparse
			run := func(threads int) error { return delta.Encode(&s, oldBits, newBits, 2, threads) }
			return run, func() { oldBits, newBits, s = nil, nil, delta.Sparse{} }, nil
		},
	}
}

func deltaApplyCase(size int64, frac float64) kernelCase {
	return kernelCase{
		name:  fmt.Sprintf("delta apply bf16 %s %.1f%% changed", sizeName(size), 100*frac),
		bytes: size,
		elems: size / 2,
		prepare: func() (func(int) error, func(), error) {
			base, newBits := deltaPair(size, frac)
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
