// cudaemu.h: one CUDA source, three compilers.
//
// needle's .cu kernels include this header and nothing else from CUDA. It makes the same source
//  1. compile to PTX with Debian's clang-16 and no CUDA toolkit
//     (`-x cuda --cuda-device-only -nocudainc -nocudalib`, see kernels/CMakeLists.txt), using
//     clang's NVPTX builtins;
//  2. compile with NVIDIA's nvcc (`make setup` installs it from PyPI where it can) into a fatbin
//     of machine code and PTX, using CUDA's own headers, which nvcc includes by itself; and
//  3. compile as plain C++20 on the host (g++/clang++, no CUDA at all) and RUN there: the threads
//     of a block are host threads, __syncthreads is a std::barrier, warp shuffles go through a
//     per-block exchange array with per-warp barriers, atomics are std::atomic_ref. This is how
//     `make test` runs every CUDA kernel of this project, with or without a GPU.
//
// Device code written against this header may use: __global__, __device__, __shared__ (static
// size only: no `extern __shared__`), __restrict__, threadIdx/blockIdx/blockDim/gridDim, warpSize
// (32), __syncthreads(), __shfl_xor_sync/__shfl_down_sync/__shfl_sync (float, int, unsigned),
// atomicAdd (int, unsigned, unsigned long long, float), atomicMax (int, unsigned), atomicCAS,
// and the math helpers cuemu_exp2f / cuemu_log2f (device: ex2.approx / lg2.approx, ~2 ulp;
// host: libm exp2f / log2f), cuemu_f2h_rn (fp32 -> fp16 bits, nearest even), cuemu_sqrt_rn
// (correctly rounded), cuemu_bits_to_float / cuemu_float_to_bits. Both device compilers emit
// the same PTX instructions for the helpers (inline asm under nvcc), so the two builds compute
// the same bits.
//
// Emulation limits (host only): every thread of a warp must call a shuffle together (as with a
// full mask; the mask argument is ignored); blocks run one after another, so __shared__ is a
// function-local static shared by the threads of the running block; launches are serialized
// by a global mutex; a block has at most 1024 threads. Grid-wide synchronization is not
// emulated.
#ifndef NEEDLE_CUDAEMU_H
#define NEEDLE_CUDAEMU_H

#include <stdint.h>

#if defined(__NVCC__)
// ---------------------------------------------------------------- device (nvcc) side
// CUDA's headers give the builtin variables, shuffles and atomics; only the helpers are ours.
#define CUEMU_INLINE __device__ inline __attribute__((always_inline))

CUEMU_INLINE float cuemu_exp2f(float x) {
  float y;
  asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
CUEMU_INLINE float cuemu_log2f(float x) {
  float y;
  asm("lg2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
CUEMU_INLINE uint16_t cuemu_f2h_rn(float x) {
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}
CUEMU_INLINE float cuemu_sqrt_rn(float x) { return __fsqrt_rn(x); }
CUEMU_INLINE float cuemu_bits_to_float(uint32_t u) { return __uint_as_float(u); }
CUEMU_INLINE uint32_t cuemu_float_to_bits(float f) { return __float_as_uint(f); }

#elif defined(__CUDA_ARCH__)
// ---------------------------------------------------------------- device (clang NVPTX) side
#include <__clang_cuda_builtin_vars.h>  // threadIdx & co. from clang's resource dir, not CUDA's

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define CUEMU_INLINE __device__ inline __attribute__((always_inline))

CUEMU_INLINE float cuemu_exp2f(float x) { return __nvvm_ex2_approx_f(x); }
CUEMU_INLINE float cuemu_log2f(float x) { return __nvvm_lg2_approx_f(x); }
CUEMU_INLINE uint16_t cuemu_f2h_rn(float x) { return __nvvm_f2h_rn(x); }  // cvt.rn.f16.f32
CUEMU_INLINE float cuemu_sqrt_rn(float x) { return __nvvm_sqrt_rn_f(x); }  // sqrt.rn.f32

CUEMU_INLINE float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
  return __nvvm_shfl_sync_bfly_f32(mask, v, lane_mask, 0x1f);
}
CUEMU_INLINE int __shfl_xor_sync(unsigned mask, int v, int lane_mask) {
  return __nvvm_shfl_sync_bfly_i32(mask, v, lane_mask, 0x1f);
}
CUEMU_INLINE unsigned __shfl_xor_sync(unsigned mask, unsigned v, int lane_mask) {
  return (unsigned)__nvvm_shfl_sync_bfly_i32(mask, (int)v, lane_mask, 0x1f);
}
CUEMU_INLINE float __shfl_down_sync(unsigned mask, float v, unsigned delta) {
  return __nvvm_shfl_sync_down_f32(mask, v, delta, 0x1f);
}
CUEMU_INLINE int __shfl_down_sync(unsigned mask, int v, unsigned delta) {
  return __nvvm_shfl_sync_down_i32(mask, v, delta, 0x1f);
}
CUEMU_INLINE unsigned __shfl_down_sync(unsigned mask, unsigned v, unsigned delta) {
  return (unsigned)__nvvm_shfl_sync_down_i32(mask, (int)v, delta, 0x1f);
}
CUEMU_INLINE float __shfl_sync(unsigned mask, float v, int src_lane) {
  return __nvvm_shfl_sync_idx_f32(mask, v, src_lane, 0x1f);
}
CUEMU_INLINE int __shfl_sync(unsigned mask, int v, int src_lane) {
  return __nvvm_shfl_sync_idx_i32(mask, v, src_lane, 0x1f);
}
CUEMU_INLINE unsigned __shfl_sync(unsigned mask, unsigned v, int src_lane) {
  return (unsigned)__nvvm_shfl_sync_idx_i32(mask, (int)v, src_lane, 0x1f);
}

CUEMU_INLINE int atomicAdd(int* p, int v) { return __nvvm_atom_add_gen_i(p, v); }
CUEMU_INLINE unsigned atomicAdd(unsigned* p, unsigned v) {
  return (unsigned)__nvvm_atom_add_gen_i((int*)p, (int)v);
}
CUEMU_INLINE unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return (unsigned long long)__nvvm_atom_add_gen_ll((long long*)p, (long long)v);
}
CUEMU_INLINE float atomicAdd(float* p, float v) { return __nvvm_atom_add_gen_f(p, v); }
CUEMU_INLINE int atomicMax(int* p, int v) { return __nvvm_atom_max_gen_i(p, v); }
CUEMU_INLINE unsigned atomicMax(unsigned* p, unsigned v) { return __nvvm_atom_max_gen_ui(p, v); }
CUEMU_INLINE int atomicCAS(int* p, int cmp, int v) { return __nvvm_atom_cas_gen_i(p, cmp, v); }
CUEMU_INLINE unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned v) {
  return (unsigned)__nvvm_atom_cas_gen_i((int*)p, (int)cmp, (int)v);
}
CUEMU_INLINE unsigned long long atomicCAS(unsigned long long* p, unsigned long long cmp,
                                          unsigned long long v) {
  return (unsigned long long)__nvvm_atom_cas_gen_ll((long long*)p, (long long)cmp, (long long)v);
}

#else
// ---------------------------------------------------------------- host emulation side
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __shared__ static
#define __restrict__ __restrict
#define CUEMU_INLINE inline

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
constexpr int warpSize = 32;

// The running thread's coordinates (thread_local: each emulated GPU thread is a host thread).
inline thread_local dim3 threadIdx, blockIdx;
// The running launch's shape; written before the block threads start, read-only during it.
inline dim3 blockDim, gridDim;

namespace cuemu {

// Block is the state one launch's threads share: the block barrier, one barrier per warp and
// the exchange slots warp shuffles pass values through (one 64-bit slot per thread).
struct Block {
  unsigned nthreads = 0;
  std::unique_ptr<std::barrier<>> sync;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  uint64_t slot[1024];
};
inline Block* current_block = nullptr;  // set for the duration of one launch

inline unsigned linear_tid() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

inline unsigned warp_size_of(unsigned warp) {
  unsigned first = warp * 32, left = current_block->nthreads - first;
  return left < 32 ? left : 32;
}

// shuffle publishes v from this thread, waits for its warp, reads lane src (own value when src
// is outside the warp, as CUDA does for shfl.down past the end), and waits again so no slot is
// overwritten before every lane has read it.
template <typename T>
T shuffle(T v, int src_lane) {
  static_assert(sizeof(T) <= 8, "shuffle of a type wider than 64 bits");
  unsigned tid = linear_tid(), warp = tid / 32, lane = tid % 32;
  Block* b = current_block;
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  b->slot[tid] = bits;
  b->warps[warp]->arrive_and_wait();
  T out = v;
  if (src_lane >= 0 && (unsigned)src_lane < warp_size_of(warp)) {
    std::memcpy(&out, &b->slot[warp * 32 + src_lane], sizeof(T));
  }
  b->warps[warp]->arrive_and_wait();
  (void)lane;
  return out;
}

inline std::mutex& launch_mutex() {
  static std::mutex m;
  return m;
}

// launch runs kernel(args...) over grid x block: one host thread per block thread, each walking
// every block in order, with a block barrier between blocks (so __shared__ statics are reused
// safely). Returns only when every thread is done.
template <typename Kernel, typename... Args>
void launch(dim3 grid, dim3 block, Kernel kernel, Args... args) {
  std::lock_guard<std::mutex> lock(launch_mutex());
  unsigned n = block.x * block.y * block.z;
  if (n == 0 || n > 1024 || grid.x * grid.y * grid.z == 0) return;
  Block b;
  b.nthreads = n;
  b.sync = std::make_unique<std::barrier<>>(n);
  for (unsigned w = 0; w * 32 < n; w++) {
    unsigned left = n - w * 32;
    b.warps.push_back(std::make_unique<std::barrier<>>(left < 32 ? left : 32));
  }
  blockDim = block;
  gridDim = grid;
  current_block = &b;
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (unsigned t = 0; t < n; t++) {
    threads.emplace_back([&, t] {
      threadIdx = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
      for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
          for (unsigned x = 0; x < grid.x; x++) {
            blockIdx = dim3(x, y, z);
            kernel(args...);
            b.sync->arrive_and_wait();
          }
    });
  }
  for (auto& th : threads) th.join();
  current_block = nullptr;
}

template <typename T>
T atomic_add(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_add(v);
}

template <typename T>
T atomic_max(T* p, T v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}

template <typename T>
T atomic_cas(T* p, T cmp, T v) {
  std::atomic_ref<T>(*p).compare_exchange_strong(cmp, v);
  return cmp;  // the old value, as CUDA's atomicCAS returns
}

}  // namespace cuemu

inline void __syncthreads() { cuemu::current_block->sync->arrive_and_wait(); }

template <typename T>
inline T __shfl_xor_sync(unsigned, T v, int lane_mask) {
  return cuemu::shuffle(v, (int)(cuemu::linear_tid() % 32) ^ lane_mask);
}
template <typename T>
inline T __shfl_down_sync(unsigned, T v, unsigned delta) {
  return cuemu::shuffle(v, (int)(cuemu::linear_tid() % 32 + delta));
}
template <typename T>
inline T __shfl_sync(unsigned, T v, int src_lane) {
  return cuemu::shuffle(v, src_lane);
}

inline int atomicAdd(int* p, int v) { return cuemu::atomic_add(p, v); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return cuemu::atomic_add(p, v); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return cuemu::atomic_add(p, v);
}
inline float atomicAdd(float* p, float v) { return cuemu::atomic_add(p, v); }
inline int atomicMax(int* p, int v) { return cuemu::atomic_max(p, v); }
inline unsigned atomicMax(unsigned* p, unsigned v) { return cuemu::atomic_max(p, v); }
inline int atomicCAS(int* p, int cmp, int v) { return cuemu::atomic_cas(p, cmp, v); }
inline unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned v) {
  return cuemu::atomic_cas(p, cmp, v);
}
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long cmp,
                                    unsigned long long v) {
  return cuemu::atomic_cas(p, cmp, v);
}

inline float cuemu_exp2f(float x) { return std::exp2(x); }
inline float cuemu_log2f(float x) { return std::log2(x); }
inline uint16_t cuemu_f2h_rn(float x) { return __builtin_bit_cast(uint16_t, (_Float16)x); }
inline float cuemu_sqrt_rn(float x) { return std::sqrt(x); }

#endif  // __NVCC__, __CUDA_ARCH__

#if !defined(__NVCC__)
// ---------------------------------------------------------------- clang device and host sides
CUEMU_INLINE float cuemu_bits_to_float(uint32_t u) { return __builtin_bit_cast(float, u); }
CUEMU_INLINE uint32_t cuemu_float_to_bits(float f) { return __builtin_bit_cast(uint32_t, f); }
#endif

#endif  // NEEDLE_CUDAEMU_H
