// cudev.h: one CUDA source, three compilers.
//
// needle's .cu kernels include this header and nothing else from CUDA. It makes the same source
//  1. compile to PTX with Debian's clang-16 and no CUDA toolkit
//     (`-x cuda --cuda-device-only -nocudainc -nocudalib`, see cmake/native_parts.cmake), using
//     clang's NVPTX builtins;
//  2. compile with NVIDIA's nvcc (`make setup` installs it from PyPI where it can) into a fatbin
//     of machine code and PTX, using CUDA's own headers, which nvcc includes by itself; and
//  3. compile as plain C++20 on the host and run there, in tests only: testkit/cudaemu/cudaemu.h,
//     included before the .cu, emulates the builtins below on host threads (how `make test` runs
//     every CUDA kernel of this project, with or without a GPU).
//
// Device code written against this header may use: __global__, __device__, __shared__ (static
// size only: no `extern __shared__`), __restrict__, threadIdx/blockIdx/blockDim/gridDim, warpSize
// (32), __syncthreads(), __shfl_xor_sync/__shfl_down_sync/__shfl_sync (float, int, unsigned),
// atomicAdd (int, unsigned, unsigned long long, float), atomicMax (int, unsigned), atomicCAS,
// and the math helpers cudev_exp2f / cudev_log2f (device: ex2.approx / lg2.approx, ~2 ulp;
// host: libm exp2f / log2f), cudev_f2h_rn (fp32 -> fp16 bits, nearest even), cudev_sqrt_rn
// (correctly rounded), cudev_bits_to_float / cudev_float_to_bits. Both device compilers emit
// the same PTX instructions for the helpers (inline asm under nvcc), so the two builds compute
// the same bits.
#ifndef NEEDLE_CUDEV_H
#define NEEDLE_CUDEV_H

#include <stdint.h>

#if defined(__NVCC__)
// ---------------------------------------------------------------- device (nvcc) side
// CUDA's headers give the builtin variables, shuffles and atomics; only the helpers are ours.
#define CUDEV_INLINE __device__ inline __attribute__((always_inline))

CUDEV_INLINE float cudev_exp2f(float x) {
  float y;
  asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
CUDEV_INLINE float cudev_log2f(float x) {
  float y;
  asm("lg2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
CUDEV_INLINE uint16_t cudev_f2h_rn(float x) {
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}
CUDEV_INLINE float cudev_sqrt_rn(float x) { return __fsqrt_rn(x); }
CUDEV_INLINE float cudev_bits_to_float(uint32_t u) { return __uint_as_float(u); }
CUDEV_INLINE uint32_t cudev_float_to_bits(float f) { return __float_as_uint(f); }

#elif defined(__CUDA_ARCH__)
// ---------------------------------------------------------------- device (clang NVPTX) side
#include <__clang_cuda_builtin_vars.h>  // threadIdx & co. from clang's resource dir, not CUDA's

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define CUDEV_INLINE __device__ inline __attribute__((always_inline))

CUDEV_INLINE float cudev_exp2f(float x) { return __nvvm_ex2_approx_f(x); }
CUDEV_INLINE float cudev_log2f(float x) { return __nvvm_lg2_approx_f(x); }
CUDEV_INLINE uint16_t cudev_f2h_rn(float x) { return __nvvm_f2h_rn(x); }  // cvt.rn.f16.f32
CUDEV_INLINE float cudev_sqrt_rn(float x) { return __nvvm_sqrt_rn_f(x); }  // sqrt.rn.f32

CUDEV_INLINE float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
  return __nvvm_shfl_sync_bfly_f32(mask, v, lane_mask, 0x1f);
}
CUDEV_INLINE int __shfl_xor_sync(unsigned mask, int v, int lane_mask) {
  return __nvvm_shfl_sync_bfly_i32(mask, v, lane_mask, 0x1f);
}
CUDEV_INLINE unsigned __shfl_xor_sync(unsigned mask, unsigned v, int lane_mask) {
  return (unsigned)__nvvm_shfl_sync_bfly_i32(mask, (int)v, lane_mask, 0x1f);
}
CUDEV_INLINE float __shfl_down_sync(unsigned mask, float v, unsigned delta) {
  return __nvvm_shfl_sync_down_f32(mask, v, delta, 0x1f);
}
CUDEV_INLINE int __shfl_down_sync(unsigned mask, int v, unsigned delta) {
  return __nvvm_shfl_sync_down_i32(mask, v, delta, 0x1f);
}
CUDEV_INLINE unsigned __shfl_down_sync(unsigned mask, unsigned v, unsigned delta) {
  return (unsigned)__nvvm_shfl_sync_down_i32(mask, (int)v, delta, 0x1f);
}
CUDEV_INLINE float __shfl_sync(unsigned mask, float v, int src_lane) {
  return __nvvm_shfl_sync_idx_f32(mask, v, src_lane, 0x1f);
}
CUDEV_INLINE int __shfl_sync(unsigned mask, int v, int src_lane) {
  return __nvvm_shfl_sync_idx_i32(mask, v, src_lane, 0x1f);
}
CUDEV_INLINE unsigned __shfl_sync(unsigned mask, unsigned v, int src_lane) {
  return (unsigned)__nvvm_shfl_sync_idx_i32(mask, (int)v, src_lane, 0x1f);
}

CUDEV_INLINE int atomicAdd(int* p, int v) { return __nvvm_atom_add_gen_i(p, v); }
CUDEV_INLINE unsigned atomicAdd(unsigned* p, unsigned v) {
  return (unsigned)__nvvm_atom_add_gen_i((int*)p, (int)v);
}
CUDEV_INLINE unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return (unsigned long long)__nvvm_atom_add_gen_ll((long long*)p, (long long)v);
}
CUDEV_INLINE float atomicAdd(float* p, float v) { return __nvvm_atom_add_gen_f(p, v); }
CUDEV_INLINE int atomicMax(int* p, int v) { return __nvvm_atom_max_gen_i(p, v); }
CUDEV_INLINE unsigned atomicMax(unsigned* p, unsigned v) { return __nvvm_atom_max_gen_ui(p, v); }
CUDEV_INLINE int atomicCAS(int* p, int cmp, int v) { return __nvvm_atom_cas_gen_i(p, cmp, v); }
CUDEV_INLINE unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned v) {
  return (unsigned)__nvvm_atom_cas_gen_i((int*)p, (int)cmp, (int)v);
}
CUDEV_INLINE unsigned long long atomicCAS(unsigned long long* p, unsigned long long cmp,
                                          unsigned long long v) {
  return (unsigned long long)__nvvm_atom_cas_gen_ll((long long*)p, (long long)cmp, (long long)v);
}

#elif !defined(NEEDLE_CUDAEMU_H)
#error "a .cu compiled for the host runs under the emulation of testkit/cudaemu/cudaemu.h: include it first"
#endif  // __NVCC__, __CUDA_ARCH__, host emulation

#if !defined(__NVCC__)
// ---------------------------------------------------------------- clang device and host sides
CUDEV_INLINE float cudev_bits_to_float(uint32_t u) { return __builtin_bit_cast(float, u); }
CUDEV_INLINE uint32_t cudev_float_to_bits(float f) { return __builtin_bit_cast(uint32_t, f); }
#endif

#endif  // NEEDLE_CUDEV_H
