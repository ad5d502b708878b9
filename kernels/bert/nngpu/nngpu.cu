// CUDA kernels of the GPU BERT encoder (encoder/bert, through package nngpu): everything of a forward pass between
// the cuBLAS GEMMs, fused so each activation is read and written once per step.
// Compiled twice from this one source (kernels/common/cudev.h): to sm_80 PTX by
// clang-16 (kernels/CMakeLists.txt), which nngpu.go embeds and launches through package cuda,
// and as C++ on the CPU by emutest/, which compares every kernel with the scalar reference ops
// of kernels/bert/nn (nn_ref.c, the oracle of the CPU encoder).
//
// Storage: the residual stream x is fp32 (as the CPU encoder keeps it), and every kernel that
// feeds a GEMM also writes its output as fp16 (the GEMM's A operand); GEMM outputs are fp32.
// All math is fp32. Sequences are packed without padding: sequence s is the tokens
// [start[s], start[s+1]) of the batch, as nn_attention takes them.
#include "kernels/common/cudev.h"

#include <stdint.h>

#include "kernels/bert/nngpu/nngpu_launch.h"  // NG_BLOCK, NG_MAX_HIDDEN, NG_ATT_QUERIES, NG_ATT_KEYS

// ng_block_sum returns the sum of v over the block (every thread gets it). red is a shared
// array of 32 floats; the leading barrier lets a caller reuse it for consecutive sums.
__device__ inline float ng_block_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float s = 0.0f;
  for (unsigned w = 0; w < (blockDim.x + 31) / 32; w++) s += red[w];
  return s;
}

// ng_layernorm_row normalizes the row whose values this thread holds at columns
// threadIdx.x + i*blockDim.x (v[i]), then writes x (fp32) and xh (fp16): the LayerNorm of
// nn_ref.c (two passes, mean then variance, as torch computes it).
__device__ inline void ng_layernorm_row(float* v, int n, float* x, uint16_t* xh, const float* gamma,
                                        const float* beta, float eps, float* red) {
  float sum = 0.0f;
  for (int i = 0, c = threadIdx.x; c < n; i++, c += blockDim.x) sum += v[i];
  float mean = ng_block_sum(sum, red) / (float)n, var = 0.0f;
  for (int i = 0, c = threadIdx.x; c < n; i++, c += blockDim.x) var += (v[i] - mean) * (v[i] - mean);
  float rstd = 1.0f / cudev_sqrt_rn(ng_block_sum(var, red) / (float)n + eps);
  for (int i = 0, c = threadIdx.x; c < n; i++, c += blockDim.x) {
    float y = (v[i] - mean) * rstd * gamma[c] + beta[c];
    x[c] = y;
    xh[c] = cudev_f2h_rn(y);
  }
}

// ng_embed_layernorm: x[t] = LayerNorm(word[ids[t]] + type0 + pos[pos_ids[t]]), one block per
// token, n <= NG_MAX_HIDDEN.
extern "C" __global__ void ng_embed_layernorm(float* __restrict__ x, uint16_t* __restrict__ xh,
                                              const int32_t* ids, const int32_t* pos_ids, const float* word,
                                              const float* pos, const float* type0, const float* gamma,
                                              const float* beta, int n, float eps) {
  __shared__ float red[32];
  long long t = blockIdx.x;
  const float* w = word + (long long)ids[t] * n;
  const float* p = pos + (long long)pos_ids[t] * n;
  float v[NG_MAX_HIDDEN / NG_BLOCK];
  for (int i = 0, c = threadIdx.x; c < n; i++, c += blockDim.x) v[i] = w[c] + type0[c] + p[c];
  ng_layernorm_row(v, n, x + t * n, xh + t * n, gamma, beta, eps, red);
}

// ng_add_layernorm: x[t] = LayerNorm(y[t] + bias + x[t]) (a Linear's output, its bias and the
// residual), one block per token, n <= NG_MAX_HIDDEN.
extern "C" __global__ void ng_add_layernorm(float* __restrict__ x, uint16_t* __restrict__ xh, const float* y,
                                            const float* bias, const float* gamma, const float* beta, int n,
                                            float eps) {
  __shared__ float red[32];
  long long t = blockIdx.x;
  float v[NG_MAX_HIDDEN / NG_BLOCK];
  for (int i = 0, c = threadIdx.x; c < n; i++, c += blockDim.x) v[i] = y[t * n + c] + bias[c] + x[t * n + c];
  ng_layernorm_row(v, n, x + t * n, xh + t * n, gamma, beta, eps, red);
}

// ng_erf is erf(x) by Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7, far below the fp16
// rounding of GELU's output), with exp through ex2.
__device__ inline float ng_erf(float x) {
  float a = x < 0.0f ? -x : x, t = 1.0f / (1.0f + 0.3275911f * a);
  float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  float y = 1.0f - poly * cudev_exp2f(-a * a * 1.4426950408889634f);
  return x < 0.0f ? -y : y;
}

// ng_bias_gelu: out[r, c] = fp16(GELU(y[r, c] + bias[c])) for rows x n values (GELU's erf form,
// as BERT's "gelu"); a grid-stride loop.
extern "C" __global__ void ng_bias_gelu(uint16_t* __restrict__ out, const float* __restrict__ y,
                                        const float* __restrict__ bias, long long rows, int n) {
  long long total = rows * n;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    float v = y[i] + bias[i % n];
    out[i] = cudev_f2h_rn(0.5f * v * (1.0f + ng_erf(v * 0.70710678118654752f)));
  }
}

// ng_attention: ctx[t, h*HD:(h+1)*HD] = softmax(q k^T / sqrt(HD)) v over the keys of t's own
// sequence, from qkv = [T, 3*heads*HD] (Q | K | V, GEMM output without its bias, added here).
// Grid (sequence, head, tile of NG_ATT_QUERIES queries); each thread is one query, holding q
// and its output row in registers, and walks the keys in shared-memory chunks with an online
// softmax (running max and sum, rescaled when the max grows: the flash-attention recurrence),
// so a sequence of any length up to the model's 512 needs no score matrix and no padding.
template <int HD>
__device__ inline void ng_attention(uint16_t* __restrict__ ctx, const float* __restrict__ qkv,
                                    const float* __restrict__ bias, const int32_t* start, int heads) {
  __shared__ float ks[NG_ATT_KEYS][HD], vs[NG_ATT_KEYS][HD];
  const int s = blockIdx.x, h = blockIdx.y;
  const int first = start[s], L = start[s + 1] - first;
  const int q0 = blockIdx.z * NG_ATT_QUERIES;
  if (q0 >= L) return;  // the whole block leaves: tiles past the sequence's end
  const int hidden = heads * HD, ld = 3 * hidden;
  const int qi = q0 + threadIdx.x;
  const bool active = qi < L;
  // Scores in the log2 domain: q is pre-scaled by log2(e)/sqrt(HD), so p = 2^(s - max).
  const float scale = 1.4426950408889634f / cudev_sqrt_rn((float)HD);
  float q[HD], acc[HD], m = -3.0e38f, l = 0.0f;
  #pragma unroll
  for (int d = 0; d < HD; d++) {
    q[d] = active ? (qkv[(long long)(first + qi) * ld + h * HD + d] + bias[h * HD + d]) * scale : 0.0f;
    acc[d] = 0.0f;
  }
  for (int k0 = 0; k0 < L; k0 += NG_ATT_KEYS) {
    const int nk = L - k0 < NG_ATT_KEYS ? L - k0 : NG_ATT_KEYS;
    __syncthreads();  // the previous chunk is consumed
    for (int i = threadIdx.x; i < nk * HD; i += blockDim.x) {
      const int j = i / HD, d = i % HD;
      const float* row = qkv + (long long)(first + k0 + j) * ld + h * HD + d;
      ks[j][d] = row[hidden] + bias[hidden + h * HD + d];
      vs[j][d] = row[2 * hidden] + bias[2 * hidden + h * HD + d];
    }
    __syncthreads();
    if (!active) continue;
    for (int j = 0; j < nk; j++) {
      float sc = 0.0f;
      #pragma unroll
      for (int d = 0; d < HD; d++) sc += q[d] * ks[j][d];
      if (sc > m) {
        const float corr = cudev_exp2f(m - sc);
        #pragma unroll
        for (int d = 0; d < HD; d++) acc[d] *= corr;
        l *= corr;
        m = sc;
      }
      const float p = cudev_exp2f(sc - m);
      l += p;
      #pragma unroll
      for (int d = 0; d < HD; d++) acc[d] += p * vs[j][d];
    }
  }
  if (!active) return;
  uint16_t* out = ctx + (long long)(first + qi) * hidden + h * HD;
  #pragma unroll
  for (int d = 0; d < HD; d++) out[d] = cudev_f2h_rn(acc[d] / l);
}

extern "C" __global__ void ng_attention_hd32(uint16_t* ctx, const float* qkv, const float* bias,
                                             const int32_t* start, int heads) {
  ng_attention<32>(ctx, qkv, bias, start, heads);
}
extern "C" __global__ void ng_attention_hd64(uint16_t* ctx, const float* qkv, const float* bias,
                                             const int32_t* start, int heads) {
  ng_attention<64>(ctx, qkv, bias, start, heads);
}

// ng_pool: out[s] = the mean of x's rows of sequence s (cls != 0: its first row), scaled to
// unit L2 norm when normalize != 0 (torch's F.normalize: eps 1e-12), as nn_pool. One block per
// sequence; an empty sequence pools to zeros.
extern "C" __global__ void ng_pool(float* __restrict__ out, const float* __restrict__ x, const int32_t* start,
                                   int n, int cls, int normalize) {
  __shared__ float red[32];
  const int s = blockIdx.x, first = start[s], L = start[s + 1] - first;
  const int rows = cls ? (L > 0 ? 1 : 0) : L;
  float* o = out + (long long)s * n;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < n; c += blockDim.x) {
    float sum = 0.0f;
    for (int r = 0; r < rows; r++) sum += x[(long long)(first + r) * n + c];
    if (!cls && L > 0) sum *= 1.0f / (float)L;
    o[c] = sum;
    ss += sum * sum;
  }
  if (!normalize) return;
  const float norm = cudev_sqrt_rn(ng_block_sum(ss, red)), inv = 1.0f / (norm > 1e-12f ? norm : 1e-12f);
  for (int c = threadIdx.x; c < n; c += blockDim.x) o[c] *= inv;
}

// ng_to_half_rows: out[i] = fp16(in[i]) for n values (round to nearest even); how fp32 weights
// read from a checkpoint become the fp16 GEMM operands on the device. A grid-stride loop.
extern "C" __global__ void ng_to_half_rows(uint16_t* __restrict__ out, const float* __restrict__ in, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    out[i] = cudev_f2h_rn(in[i]);
}
