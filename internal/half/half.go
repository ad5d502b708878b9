// Package half is needle's one conversion between float32 and the 16-bit float formats of
// weights and embeddings in Go: IEEE binary16 (fp16) and bfloat16. The C and CUDA kernels have
// theirs in kernels/common/half.h, with the same rounding.
package half

import "math"

// ToFloat32 converts IEEE binary16 bits exactly (subnormals, inf and NaN with its payload).
func ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN: keep the payload
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	}
	v := float32(mant) * (1.0 / (1 << 24)) // a subnormal (or zero): mant * 2^-24, exact
	if sign != 0 {
		v = -v
	}
	return v
}

// FromFloat32 rounds f to the nearest binary16, ties to even, as F16C's vcvtps2ph, a GPU's
// cvt.rn.f16.f32 and PyTorch's .half() do: overflow to inf, subnormals kept, NaN quiet with
// its top payload bits.
func FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign, a := uint16(b>>16)&0x8000, b&0x7fffffff
	switch {
	case a > 0x7f800000: // NaN
		return sign | 0x7e00 | uint16(a>>13)&0x3ff
	case a >= 0x477ff000: // >= 65520 (and inf) round to inf
		return sign | 0x7c00
	case a < 0x33000000: // below half the smallest subnormal: zero
		return sign
	}
	m, shift, h := a&0x7fffff|0x800000, uint32(13), uint32(0)
	if a >= 0x38800000 { // a normal binary16: keep 10 mantissa bits, rebias the exponent
		h = (a>>23-112)<<10 | a&0x7fffff>>13
	} else { // a subnormal: units of 2^-24
		shift = 126 - a>>23
		h = m >> shift
	}
	rem, mid := m&(1<<shift-1), uint32(1)<<(shift-1)
	if rem > mid || rem == mid && h&1 == 1 {
		h++ // a carry into the exponent is right
	}
	return sign | uint16(h)
}

// BF16ToFloat32 converts bfloat16 bits exactly (the top half of a float32).
func BF16ToFloat32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// BF16FromFloat32 rounds f to the nearest bfloat16, ties to even (subnormals kept, NaN quiet).
func BF16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}
