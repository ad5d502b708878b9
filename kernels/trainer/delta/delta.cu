// CUDA delta encode/apply: the ops of delta.h on a GPU. Compiled twice from this one source
// (kernels/common/cudev.h): to sm_80 PTX by clang-16 and a fatbin by nvcc
// (kernels/CMakeLists.txt), which gpu.go embeds and libneedle.so links in, both launching them
// with delta_gpu.c on the CUDA host core; and as C++ on the CPU by the emulation test (emutest/),
// which compares it with the scalar reference. `needle delta` uses the CPU kernels.
//
// Encode keeps the reference's output order with two launches over the same tiles (block b owns
// elements [b*T, (b+1)*T), T = blockDim.x * NL_DELTA_ITEMS, read with coalesced strided loads):
//   1. nl_cuda_delta_count{16,32}: counts[b] = changed elements of tile b;
//   2. the host turns counts into exclusive prefix sums offsets[b] (gridDim values);
//   3. nl_cuda_delta_write{16,32}: each tile writes its entries from offsets[b] on, ordered by
//      a block-wide scan of the changed flags (warp shuffles, then warp totals in shared memory).
// Apply (nl_cuda_delta_apply{16,32}) scatters one entry per thread after the host has checked
// the indices (nl_delta_check). Launch (delta_launch.h): blockDim.x a multiple of 32 up to 1024
// (whole warps for the full-mask shuffles; NL_DELTA_BLOCK from the launcher), no dynamic shared
// memory.
#include "kernels/common/cudev.h"
#include "kernels/trainer/delta/delta_launch.h"

static_assert(NL_DELTA_BLOCK % 32 == 0 && NL_DELTA_BLOCK <= 1024,
              "whole warps, at most 32 of them (block_scan's warp_base)");

// block_scan returns how many threads before this one in the block have flag set, and the
// block's total in *total. Every thread of the block must call it.
__device__ inline unsigned block_scan(unsigned flag, unsigned* total) {
  __shared__ unsigned warp_base[33];  // exclusive prefix per warp; [32] = block total
  unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  unsigned x = flag;  // becomes the inclusive prefix within the warp
  for (int off = 1; off < 32; off *= 2) {
    unsigned t = __shfl_sync(0xffffffffu, x, (int)(lane >= (unsigned)off ? lane - off : lane));
    if (lane >= (unsigned)off) x += t;
  }
  if (lane == 31) warp_base[warp] = x;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned run = 0;
    for (unsigned w = 0; w < blockDim.x / 32; w++) {
      unsigned s = warp_base[w];
      warp_base[w] = run;
      run += s;
    }
    warp_base[32] = run;
  }
  __syncthreads();
  unsigned before = warp_base[warp] + x - flag;
  *total = warp_base[32];
  __syncthreads();  // warp_base is rewritten by the next call
  return before;
}

template <typename T>
__device__ inline void count_tile(const T* old_bits, const T* new_bits, long long n,
                                  unsigned* counts) {
  long long start = (long long)blockIdx.x * blockDim.x * NL_DELTA_ITEMS;
  unsigned mine = 0;
  for (int r = 0; r < NL_DELTA_ITEMS; r++) {
    long long i = start + (long long)r * blockDim.x + threadIdx.x;
    if (i < n && old_bits[i] != new_bits[i]) mine++;
  }
  unsigned total;
  block_scan(mine, &total);
  if (threadIdx.x == 0) counts[blockIdx.x] = total;
}

template <typename T>
__device__ inline void write_tile(const T* old_bits, const T* new_bits, long long n,
                                  const unsigned long long* offsets, void* idx, int idx_size,
                                  T* vals) {
  long long start = (long long)blockIdx.x * blockDim.x * NL_DELTA_ITEMS;
  unsigned long long out = offsets[blockIdx.x];
  for (int r = 0; r < NL_DELTA_ITEMS; r++) {
    long long i = start + (long long)r * blockDim.x + threadIdx.x;
    unsigned flag = i < n && old_bits[i] != new_bits[i];
    unsigned total, before = block_scan(flag, &total);
    if (flag) {
      unsigned long long k = out + before;
      if (idx_size == 4) {
        ((unsigned*)idx)[k] = (unsigned)i;
      } else {
        ((unsigned long long*)idx)[k] = (unsigned long long)i;
      }
      vals[k] = new_bits[i];
    }
    out += total;
  }
}

template <typename T>
__device__ inline void apply_entries(T* base, const void* idx, int idx_size, const T* vals,
                                     long long nnz) {
  long long step = (long long)gridDim.x * blockDim.x;
  for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < nnz; k += step) {
    unsigned long long g = idx_size == 4 ? ((const unsigned*)idx)[k]
                                         : ((const unsigned long long*)idx)[k];
    base[g] = vals[k];
  }
}

// Entry points per element width (16: bf16/fp16 bits, 32: fp32 bits). idx_size is 4 or 8.
#define NL_DELTA_ENTRIES(BITS, T)                                                              \
  extern "C" __global__ void nl_cuda_delta_count##BITS(const T* old_bits, const T* new_bits,   \
                                                       long long n, unsigned* counts) {        \
    count_tile<T>(old_bits, new_bits, n, counts);                                              \
  }                                                                                            \
  extern "C" __global__ void nl_cuda_delta_write##BITS(                                        \
      const T* old_bits, const T* new_bits, long long n, const unsigned long long* offsets,    \
      void* idx, int idx_size, T* vals) {                                                      \
    write_tile<T>(old_bits, new_bits, n, offsets, idx, idx_size, vals);                        \
  }                                                                                            \
  extern "C" __global__ void nl_cuda_delta_apply##BITS(T* base, const void* idx, int idx_size, \
                                                       const T* vals, long long nnz) {         \
    apply_entries<T>(base, idx, idx_size, vals, nnz);                                          \
  }
NL_DELTA_ENTRIES(16, uint16_t)
NL_DELTA_ENTRIES(32, uint32_t)
