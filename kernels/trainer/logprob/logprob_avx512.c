// AVX-512 row kernel: 16 lanes x 4 vectors per step, each lane an independent online state,
// folded into the caller's state at the end; tails (< 64 elements) go through the scalar update.
// The max is raised lazily: the rescale runs only when a step's max beats some lane's max (after
// the first few steps of a row, almost never), so the steady state costs one exp per element.
#if defined(__x86_64__)
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma,f16c")
#include <float.h>
#include <immintrin.h>

#include "logprob.h"

// e^d for d <= 0 (or NaN -> NaN), relative error ~2e-7 (see NL_EXP2_C* in logprob.h); scalef
// handles 2^n down to underflow.
static inline __m512 exp_neg(__m512 d) {
  __m512 u = _mm512_mul_ps(d, _mm512_set1_ps(NL_LOG2E));
  __m512 n = _mm512_roundscale_ps(u, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_sub_ps(u, n);
  __m512 p = NL_EXP2_POLY(r, _mm512_fmadd_ps, _mm512_set1_ps);
  return _mm512_scalef_ps(p, n);
}

// load32 reads elements [i, i+32) (unscaled) into two vectors, in an order of its choice
// (the row statistics do not depend on element order). bf16 takes the cheap route: one 64-byte
// load, the even elements shifted into the high halves, the odd ones masked in place; no
// widening shuffles.
static inline void load32(const void* row, int32_t dtype, int64_t i, __m512* a, __m512* b) {
  const uint16_t* h = (const uint16_t*)row + i;
  switch (dtype) {
    case NL_BF16: {
      __m512i v = _mm512_loadu_si512(h);
      *a = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
      *b = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)));
      break;
    }
    case NL_F16:
      *a = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)h));
      *b = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(h + 16)));
      break;
    default:
      *a = _mm512_loadu_ps((const float*)row + i);
      *b = _mm512_loadu_ps((const float*)row + i + 16);
  }
}

// One vector of raw values x into the lane states: y = x * inv_t rounded as the scalar reference
// rounds it (never fused into the sub: an exact x * inv_t - m can exceed 0 by half an ulp of m,
// which overflows exp for |m| > 1e9; hence no FP contraction, see logprob.go), d = y - m clamped
// at -120 (exp underflows to 0 there) so that -inf entries add exactly 0 * -120 to t, not
// 0 * -inf = NaN; the max operand order keeps NaN (VMAXPS returns its second operand when either
// is NaN).
#define PUSH(x, k)                                                              \
  do {                                                                          \
    __m512 d_ = _mm512_max_ps(lo, _mm512_sub_ps(_mm512_mul_ps((x), inv_t), m)); \
    __m512 e_ = exp_neg(d_);                                                    \
    s[k] = _mm512_add_ps(s[k], e_);                                             \
    t[k] = _mm512_fmadd_ps(e_, d_, t[k]);                                       \
  } while (0)

static inline void stats(const void* row, int32_t dtype, int64_t len, float inv_tf, nl_stats* st) {
  const __m512 lo = _mm512_set1_ps(-120.0f), inv_t = _mm512_set1_ps(inv_tf);
  // m starts at -FLT_MAX, not -inf, so a lane that has seen only -inf entries computes
  // d = -inf - m = -inf (clamped, adds 0) rather than -inf - -inf = NaN.
  __m512 m = _mm512_set1_ps(-FLT_MAX);
  // Four sum pairs, one per unrolled vector: independent add chains (the adds' latency would
  // otherwise bound the loop) and a quarter of the terms per fp32 sum (smaller rounding error).
  __m512 s[4], t[4];
  for (int k = 0; k < 4; k++) s[k] = t[k] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= len; i += 64) {
    __m512 x0, x1, x2, x3;
    load32(row, dtype, i, &x0, &x1);
    load32(row, dtype, i + 32, &x2, &x3);
    // inv_t > 0: the max of the raw values, scaled, is the max of the scaled values.
    __m512 bm = _mm512_mul_ps(_mm512_max_ps(_mm512_max_ps(x0, x1), _mm512_max_ps(x2, x3)), inv_t);
    __mmask16 up = _mm512_cmp_ps_mask(bm, m, _CMP_GT_OQ);  // NaN lanes never raise the max
    if (up) {
      __m512 mn = _mm512_mask_mov_ps(m, up, bm);
      __m512 d = _mm512_max_ps(lo, _mm512_sub_ps(m, mn)), a = exp_neg(d);
      for (int k = 0; k < 4; k++) {
        t[k] = _mm512_mul_ps(a, _mm512_fmadd_ps(d, s[k], t[k]));
        s[k] = _mm512_mul_ps(a, s[k]);
      }
      m = mn;
    }
    PUSH(x0, 0);
    PUSH(x1, 1);
    PUSH(x2, 2);
    PUSH(x3, 3);
  }
  float ms[16], ss[16], ts[16];
  _mm512_storeu_ps(ms, m);
  _mm512_storeu_ps(ss, _mm512_add_ps(_mm512_add_ps(s[0], s[1]), _mm512_add_ps(s[2], s[3])));
  _mm512_storeu_ps(ts, _mm512_add_ps(_mm512_add_ps(t[0], t[1]), _mm512_add_ps(t[2], t[3])));
  for (int l = 0; l < 16; l++) nl_stats_merge(st, ms[l], ss[l], ts[l]);
  for (; i < len; i++) nl_stats_push(st, nl_load(row, dtype, i) * inv_tf);
}

void nl_stats_avx512(const void* row, int32_t dtype, int64_t len, float inv_t, nl_stats* st) {
  switch (dtype) {  // constant dtype per call site: the compiler specializes each loop
    case NL_BF16: stats(row, NL_BF16, len, inv_t, st); break;
    case NL_F16: stats(row, NL_F16, len, inv_t, st); break;
    default: stats(row, NL_F32, len, inv_t, st);
  }
}

// The fused op's logits (logprob_linear.c): dotmm at 16 lanes.
#define VW 16
#define SUFFIX avx512
#define DOTMM_NAME logprob
#include "../../linalg/dotmm/dotmm_vec.h"
#endif
