// dtype.h: the element types of logits and their decoding to fp32. Plain bit manipulation with
// no includes but stdint.h, so logprob.cu can use it on the GPU too (clang: under
// `#pragma clang force_cuda_host_device`; nvcc, which has no such pragma: NL_DTYPE_FN).
#ifndef NEEDLE_LOGPROB_DTYPE_H
#define NEEDLE_LOGPROB_DTYPE_H

#include <stdint.h>

#if defined(__NVCC__)
#define NL_DTYPE_FN static inline __host__ __device__
#else
#define NL_DTYPE_FN static inline
#endif

enum { NL_F32 = 0, NL_F16 = 1, NL_BF16 = 2 };  // element type of logits

// nl_half_to_float converts IEEE fp16 bits (subnormals, inf and NaN included).
NL_DTYPE_FN float nl_half_to_float(uint16_t hbits) {
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

NL_DTYPE_FN float nl_bf16_to_float(uint16_t b) {
  union { uint32_t u; float f; } r = {(uint32_t)b << 16};
  return r.f;
}

#endif  // NEEDLE_LOGPROB_DTYPE_H
