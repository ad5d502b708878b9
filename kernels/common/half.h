// half.h: needle's one conversion between fp32 and the 16-bit float formats (IEEE binary16 and
// bfloat16), for the C kernels and the .cu kernels alike. Plain bit manipulation with no
// includes but stdint.h, so device code can call it too (clang: include it under
// `#pragma clang force_cuda_host_device`; nvcc, which has no such pragma: NL_HALF_FN).
#ifndef NEEDLE_HALF_H
#define NEEDLE_HALF_H

#include <stdint.h>

#if defined(__NVCC__)
#define NL_HALF_FN static inline __host__ __device__
#else
#define NL_HALF_FN static inline
#endif

// nl_half_to_float converts IEEE fp16 bits exactly (subnormals, inf and NaN included).
NL_HALF_FN float nl_half_to_float(uint16_t hbits) {
  uint32_t sign = (uint32_t)(hbits & 0x8000) << 16, exp = (hbits >> 10) & 0x1f, man = hbits & 0x3ff;
  union { uint32_t u; float f; } r;
  if (exp == 0x1f) {
    r.u = sign | 0x7f800000u | (man << 13);
  } else if (exp == 0) {
    r.f = (float)man * 5.9604644775390625e-8f;  // man * 2^-24
    r.u |= sign;
  } else {
    r.u = sign | ((exp + 112) << 23) | (man << 13);
  }
  return r.f;
}

// nl_float_to_half rounds to the nearest fp16, ties to even, as F16C's vcvtps2ph, a GPU's
// cvt.rn.f16.f32 and PyTorch's .half() do: overflow to inf, subnormals kept, NaN quiet with its
// top payload bits (as vcvtps2ph; cvt.rn.f16.f32 writes one canonical NaN instead).
NL_HALF_FN uint16_t nl_float_to_half(float f) {
  union { float f; uint32_t u; } v = {f};
  uint32_t sign = (v.u >> 16) & 0x8000u, a = v.u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // >= 65520 (and inf) round to inf
  if (a < 0x33000000u) return (uint16_t)sign;               // below half the smallest subnormal: 0
  uint32_t m = (a & 0x7fffffu) | 0x800000u, e = a >> 23, shift, h;
  if (a >= 0x38800000u) {  // a normal fp16: keep 10 mantissa bits, rebias the exponent
    shift = 13;
    h = ((e - 112) << 10) | ((a & 0x7fffffu) >> 13);
  } else {  // a subnormal fp16: units of 2^-24
    shift = 126 - e;
    h = m >> shift;
  }
  uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (h & 1))) h++;  // a carry into the exponent is right
  return (uint16_t)(sign | h);
}

// nl_bf16_to_float converts bfloat16 bits exactly (the top half of an fp32).
NL_HALF_FN float nl_bf16_to_float(uint16_t b) {
  union { uint32_t u; float f; } r = {(uint32_t)b << 16};
  return r.f;
}

#endif  // NEEDLE_HALF_H
