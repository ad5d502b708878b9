// cudaemu.h: the host half of kernels/common/cudev.h, for tests: the same .cu source compiled
// as plain C++20 on the host (g++/clang++, no CUDA at all) and RUN there. The threads of a block
// are host threads, __syncthreads is a std::barrier, warp shuffles go through a per-block
// exchange array with per-warp barriers, atomics are std::atomic_ref. Include it before a .cu
// (which includes cudev.h); under a device compiler it is cudev.h alone.
//
// Emulation limits: every thread of a warp must call a shuffle together (as with a full mask;
// the mask argument is ignored); blocks run one after another, so __shared__ is a function-local
// static shared by the threads of the running block; launches are serialized by a global mutex;
// a block has at most 1024 threads. Grid-wide synchronization is not emulated.
#ifndef NEEDLE_CUDAEMU_H
#define NEEDLE_CUDAEMU_H

#include <stdint.h>

#if !defined(__NVCC__) && !defined(__CUDA_ARCH__)
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
#define CUDEV_INLINE inline

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

inline float cudev_exp2f(float x) { return std::exp2(x); }
inline float cudev_log2f(float x) { return std::log2(x); }
inline uint16_t cudev_f2h_rn(float x) { return __builtin_bit_cast(uint16_t, (_Float16)x); }
inline float cudev_sqrt_rn(float x) { return std::sqrt(x); }

#endif  // host

#include "kernels/common/cudev.h"

#endif  // NEEDLE_CUDAEMU_H
