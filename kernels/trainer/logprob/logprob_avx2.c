// AVX2 row kernel: the AVX-512 design (see logprob_avx512.c) on 8 lanes x 4 vectors; 2^n is
// built in the exponent bits, so d is clamped at -87 (n >= -126, exp(-87) ~ 1.6e-38 adds nothing).
#if defined(__x86_64__)
#pragma GCC target("avx2,fma,f16c")
#include <float.h>
#include <immintrin.h>

#include "logprob.h"

// e^d for d in [-87, 0] (or NaN -> NaN): as exp_neg in logprob_avx512.c, 2^n built in the
// exponent bits.
static inline __m256 exp_neg8(__m256 d) {
  __m256 u = _mm256_mul_ps(d, _mm256_set1_ps(NL_LOG2E));
  __m256 n = _mm256_round_ps(u, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_sub_ps(u, n);
  __m256 p = NL_EXP2_POLY(r, _mm256_fmadd_ps, _mm256_set1_ps);
  __m256i pow2n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(pow2n));
}

// load16 reads elements [i, i+16) (unscaled) into two vectors, bf16 as even/odd halves
// (see load32 in logprob_avx512.c).
static inline void load16(const void* row, int32_t dtype, int64_t i, __m256* a, __m256* b) {
  const uint16_t* h = (const uint16_t*)row + i;
  switch (dtype) {
    case NL_BF16: {
      __m256i v = _mm256_loadu_si256((const __m256i*)h);
      *a = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
      *b = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u)));
      break;
    }
    case NL_F16:
      *a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)h));
      *b = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(h + 8)));
      break;
    default:
      *a = _mm256_loadu_ps((const float*)row + i);
      *b = _mm256_loadu_ps((const float*)row + i + 8);
  }
}

// One vector of raw values x into the lane states, as PUSH in logprob_avx512.c.
#define PUSH8(x, k)                                                             \
  do {                                                                          \
    __m256 d_ = _mm256_max_ps(lo, _mm256_sub_ps(_mm256_mul_ps((x), inv_t), m)); \
    __m256 e_ = exp_neg8(d_);                                                   \
    s[k] = _mm256_add_ps(s[k], e_);                                             \
    t[k] = _mm256_fmadd_ps(e_, d_, t[k]);                                       \
  } while (0)

static inline void stats8(const void* row, int32_t dtype, int64_t len, float inv_tf, nl_stats* st) {
  const __m256 lo = _mm256_set1_ps(-87.0f), inv_t = _mm256_set1_ps(inv_tf);
  __m256 m = _mm256_set1_ps(-FLT_MAX);
  // Four sum pairs, one per unrolled vector: independent add chains (the adds' latency would
  // otherwise bound the loop) and a quarter of the terms per fp32 sum (smaller rounding error).
  __m256 s[4], t[4];
  for (int k = 0; k < 4; k++) s[k] = t[k] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= len; i += 32) {
    __m256 x0, x1, x2, x3;
    load16(row, dtype, i, &x0, &x1);
    load16(row, dtype, i + 16, &x2, &x3);
    // inv_t > 0: the max of the raw values, scaled, is the max of the scaled values.
    __m256 bm = _mm256_mul_ps(_mm256_max_ps(_mm256_max_ps(x0, x1), _mm256_max_ps(x2, x3)), inv_t);
    __m256 up = _mm256_cmp_ps(bm, m, _CMP_GT_OQ);
    if (_mm256_movemask_ps(up)) {
      __m256 mn = _mm256_blendv_ps(m, bm, up);
      __m256 d = _mm256_max_ps(lo, _mm256_sub_ps(m, mn)), a = exp_neg8(d);
      for (int k = 0; k < 4; k++) {
        t[k] = _mm256_mul_ps(a, _mm256_fmadd_ps(d, s[k], t[k]));
        s[k] = _mm256_mul_ps(a, s[k]);
      }
      m = mn;
    }
    PUSH8(x0, 0);
    PUSH8(x1, 1);
    PUSH8(x2, 2);
    PUSH8(x3, 3);
  }
  float ms[8], ss[8], ts[8];
  _mm256_storeu_ps(ms, m);
  _mm256_storeu_ps(ss, _mm256_add_ps(_mm256_add_ps(s[0], s[1]), _mm256_add_ps(s[2], s[3])));
  _mm256_storeu_ps(ts, _mm256_add_ps(_mm256_add_ps(t[0], t[1]), _mm256_add_ps(t[2], t[3])));
  for (int l = 0; l < 8; l++) nl_stats_merge(st, ms[l], ss[l], ts[l]);
  for (; i < len; i++) nl_stats_push(st, nl_load(row, dtype, i) * inv_tf);
}

void nl_stats_avx2(const void* row, int32_t dtype, int64_t len, float inv_t, nl_stats* st) {
  switch (dtype) {
    case NL_BF16: stats8(row, NL_BF16, len, inv_t, st); break;
    case NL_F16: stats8(row, NL_F16, len, inv_t, st); break;
    default: stats8(row, NL_F32, len, inv_t, st);
  }
}

// The fused op's logits (logprob_linear.c): dotmm at 8 lanes.
#define VW 8
#define SUFFIX avx2
#define DOTMM_NAME logprob
#include "../../linalg/dotmm/dotmm_vec.h"
#endif
