// CUDA logprob: the op of logprob.h on a GPU, one block per row. Compiled twice from this one
// source (kernels/common/cudev.h): to sm_80 PTX by clang-16 and a fatbin by nvcc
// (kernels/CMakeLists.txt), which gpu.go embeds and libneedle.so links in, both launching it with
// logprob_gpu.c on the CUDA host core; and as C++ on the CPU by the emulation test (emutest/),
// which compares it with the scalar reference on every machine; on a real GPU, when one is found,
// gpu_test.go compares it with the float64 reference.
//
// Each thread folds a strided slice of the row (coalesced loads) into an online state in base 2
// (z = y * log2 e, so exp is one ex2.approx); states merge by warp shuffles, then across warps
// through shared memory. Launch: grid (rows), block (NL_LOGPROB_BLOCK of logprob_launch.h, or
// any multiple of 32 up to 1024: the full-mask shuffles need whole warps) threads, no dynamic
// shared memory. Only logprob runs on the GPU; the fused linear op is CPU-only (dotmm).
#include "kernels/common/cudev.h"
#include "kernels/trainer/logprob/logprob_launch.h"

// The element types and their decoders, as the C kernels use them (plain bit manipulation).
#include <stdint.h>
#pragma clang force_cuda_host_device begin
#include "kernels/trainer/logprob/dtype.h"  // NL_F32.., and half.h's decoders
#pragma clang force_cuda_host_device end

static_assert(NL_LOGPROB_BLOCK % 32 == 0 && NL_LOGPROB_BLOCK <= 1024,
              "whole warps, at most 32 of them (sm_m, sm_s, sm_t)");

#define NL_CUDA_LOG2E 1.4426950408889634f
#define NL_LN2 0.6931471805599453f

struct Stats2 {
  float m, s, t;  // max of z, sum 2^(z-m), sum 2^(z-m) * (z-m); m = -inf when empty
};

// Merge b into a. Empty states (s == 0) are no-ops; NaN in either propagates through s.
__device__ inline void merge2(Stats2& a, const Stats2& b) {
  if (b.s == 0.0f) return;
  if (a.s == 0.0f) {
    a = b;
    return;
  }
  float m = a.m > b.m ? a.m : b.m, da = a.m - m, db = b.m - m;
  float ea = cudev_exp2f(da), eb = cudev_exp2f(db);
  // A factor of 0 (da or db -inf) drops those terms: never 0 * inf = NaN.
  a.t = (ea > 0.0f ? ea * (a.t + da * a.s) : 0.0f) + (eb > 0.0f ? eb * (b.t + db * b.s) : 0.0f);
  a.s = ea * a.s + eb * b.s;
  a.m = m;
}

__device__ inline void push2(Stats2& st, float z) {
  if (z == -__builtin_inff()) return;  // adds exactly 0
  Stats2 one = {z, 1.0f, 0.0f};
  merge2(st, one);
}

template <int DTYPE>
__device__ inline float load(const void* row, long long i) {
  if (DTYPE == NL_BF16) return nl_bf16_to_float(((const uint16_t*)row)[i]);
  if (DTYPE == NL_F16) return nl_half_to_float(((const uint16_t*)row)[i]);
  return ((const float*)row)[i];
}

template <int DTYPE>
__device__ inline void logprob_row(const void* logits, long long v, const long long* labels,
                                   float inv_t, long long ignore_index, float* out_logprob,
                                   float* out_entropy, float* out_lse) {
  __shared__ float sm_m[32], sm_s[32], sm_t[32];
  long long row = blockIdx.x;
  const char* base = (const char*)logits + row * v * (DTYPE == NL_F32 ? 4 : 2);
  float scale = inv_t * NL_CUDA_LOG2E;
  Stats2 st = {-__builtin_inff(), 0.0f, 0.0f};
  for (long long j = threadIdx.x; j < v; j += blockDim.x) push2(st, load<DTYPE>(base, j) * scale);
  for (int off = 16; off > 0; off /= 2) {
    Stats2 o = {__shfl_xor_sync(0xffffffffu, st.m, off), __shfl_xor_sync(0xffffffffu, st.s, off),
                __shfl_xor_sync(0xffffffffu, st.t, off)};
    merge2(st, o);
  }
  unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = (blockDim.x + 31) / 32;
  if (lane == 0) sm_m[warp] = st.m, sm_s[warp] = st.s, sm_t[warp] = st.t;
  __syncthreads();
  if (threadIdx.x == 0) {
    Stats2 all = {-__builtin_inff(), 0.0f, 0.0f};
    for (unsigned w = 0; w < warps; w++) {
      Stats2 o = {sm_m[w], sm_s[w], sm_t[w]};
      merge2(all, o);
    }
    if (all.m == __builtin_inff()) all.s = __builtin_nanf("");  // a +inf logit: NaN row
    float log2_s = cudev_log2f(all.s), lse = (all.m + log2_s) * NL_LN2;
    long long l = labels[row];
    // A label outside [0, v) (not ignore_index) reads nothing and gives NaN: the callers that
    // pass device-resident labels (libneedle's needle_cuda_logprob_*) cannot check them first.
    bool in_row = l >= 0 && l < v;
    out_logprob[row] = l == ignore_index ? 0.0f
                       : in_row          ? load<DTYPE>(base, l) * inv_t - lse
                                         : __builtin_nanf("");
    if (out_entropy) out_entropy[row] = (log2_s - all.t / all.s) * NL_LN2;
    if (out_lse) out_lse[row] = lse;
  }
}

// Entry points, one per dtype. out_entropy and out_lse may be null.
#define NL_CUDA_ENTRY(name, DT)                                                             \
  extern "C" __global__ void name(const void* logits, long long v, const long long* labels, \
                                  float inv_t, long long ignore_index, float* out_logprob,   \
                                  float* out_entropy, float* out_lse) {                      \
    logprob_row<DT>(logits, v, labels, inv_t, ignore_index, out_logprob, out_entropy,        \
                    out_lse);                                                                \
  }
NL_CUDA_ENTRY(nl_cuda_logprob_f32, NL_F32)
NL_CUDA_ENTRY(nl_cuda_logprob_f16, NL_F16)
NL_CUDA_ENTRY(nl_cuda_logprob_bf16, NL_BF16)
