// Kernels that exercise every facility of cudaemu.h. testkit/cudaemu/CMakeLists.txt compiles
// this file to PTX (proving the device half of the header builds, atomics included) and runs it
// under host emulation in selftest_main.cpp (proving the host half computes what CUDA would).
#include "testkit/cudaemu/cudaemu.h"

// block_sum: out[blockIdx.x] = sum of in[block's slice], via xor shuffles within warps and
// shared memory across warps. Also counts threads with atomicAdd and records the max threadIdx.
extern "C" __global__ void block_sum(const float* in, float* out, int* count, unsigned* max_tid) {
  __shared__ float warp_sums[32];
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = in[i];
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0;
    for (unsigned w = 0; w < blockDim.x / 32; w++) s += warp_sums[w];
    out[blockIdx.x] = s;
  }
  atomicAdd(count, 1);
  atomicMax(max_tid, threadIdx.x);
}

// shuffles: for each thread t of a warp: down[t] = lane t+1's value (own past the end),
// bcast[t] = lane 3's value, ints through the int overloads.
extern "C" __global__ void shuffles(const int* in, int* down, int* bcast, float* fsum) {
  unsigned t = threadIdx.x;
  int v = in[t];
  down[t] = __shfl_down_sync(0xffffffffu, v, 1u);
  bcast[t] = __shfl_sync(0xffffffffu, v, 3);
  float f = (float)v;
  for (unsigned off = 16; off > 0; off /= 2) f += __shfl_down_sync(0xffffffffu, f, off);
  if (t % 32 == 0) atomicAdd(fsum, f);
}

// cas_claim: every thread tries to claim slot 0 with atomicCAS; exactly one wins. Threads of a
// 2D block also write their linear index, checking threadIdx.y and blockDim.
extern "C" __global__ void cas_claim(unsigned* slot, unsigned long long* total, unsigned* seen) {
  unsigned tid = threadIdx.y * blockDim.x + threadIdx.x;
  if (atomicCAS(slot, 0u, tid + 1) == 0u) atomicAdd(total, 1ull);
  seen[tid] = tid;
}
