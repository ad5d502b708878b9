// The SIMD row kernel nl_stats_SUFFIX (logprob.h) written once with GCC vector extensions:
// logprob_avx2.c (VW 8) and logprob_avx512.c (VW 16) set a target pragma, define VW (float
// lanes) and SUFFIX, and include this file. Each lane keeps an independent online state over 4
// vectors per step, folded into the caller's state at the end; tails (< 4 * VW elements) go
// through the scalar update. The max is raised lazily: the rescale runs only when a step's max
// beats some lane's max (after the first few steps of a row, almost never), so the steady state
// costs one exp per element.
//
// What vector extensions cannot say (VMAXPS's NaN rule, rounding, F16C, masks, scalef) is a
// handful of per-ISA intrinsics below. At VW 16 without AVX-512F they run on two 8-lane halves
// with the same bits: that is the tests' lanes16 build (test/), which runs the AVX-512 kernel's
// arithmetic on AVX2 machines. Float math must not be contracted (cgo's -std=c11, CMake's
// -ffp-contract=off; see logprob.go): every FMA here is an explicit vfma.
#include <float.h>
#include <immintrin.h>
#include <string.h>

#include "logprob.h"

typedef float vf __attribute__((vector_size(VW * 4)));
typedef int32_t vi __attribute__((vector_size(VW * 4)));
typedef uint32_t vu __attribute__((vector_size(VW * 4)));

#define LP_CAT2(a, b) a##_##b
#define LP_CAT(a, b) LP_CAT2(a, b)

static inline vf splat(float a) { return __builtin_shuffle((vf){a}, (vi){0}); }  // a in every lane

#if VW == 16 && defined(__AVX512F__)
typedef __mmask16 vmask;  // lanes where a compare held
static inline vf vmax(vf a, vf b) { return (vf)_mm512_max_ps((__m512)a, (__m512)b); }
static inline vf vfma(vf a, vf b, vf c) { return (vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c); }
static inline vf vround(vf u) {
  return (vf)_mm512_roundscale_ps((__m512)u, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
static inline vf loadh(const uint16_t* h) { return (vf)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)h)); }
static inline vmask vgt(vf a, vf b) { return _mm512_cmp_ps_mask((__m512)a, (__m512)b, _CMP_GT_OQ); }
static inline int vany(vmask m) { return m != 0; }
static inline vf vblend(vf a, vf b, vmask m) { return (vf)_mm512_mask_mov_ps((__m512)a, m, (__m512)b); }
#else
// The 8-lane intrinsics on each of the VW / 8 halves of a vector (one at VW 8).
#define LP_HALVES (VW / 8)
typedef union {
  vf v;
  __m256 h[LP_HALVES];
} halves;
typedef vf vmask;  // all-ones lanes where a compare held
static inline vf vmax(vf a, vf b) {
  halves x = {a}, y = {b};
  for (int k = 0; k < LP_HALVES; k++) x.h[k] = _mm256_max_ps(x.h[k], y.h[k]);
  return x.v;
}
static inline vf vfma(vf a, vf b, vf c) {
  halves x = {a}, y = {b}, z = {c};
  for (int k = 0; k < LP_HALVES; k++) z.h[k] = _mm256_fmadd_ps(x.h[k], y.h[k], z.h[k]);
  return z.v;
}
static inline vf vround(vf u) {
  halves x = {u};
  for (int k = 0; k < LP_HALVES; k++) x.h[k] = _mm256_round_ps(x.h[k], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return x.v;
}
static inline vf loadh(const uint16_t* h) {
  halves x;
  for (int k = 0; k < LP_HALVES; k++) x.h[k] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(h + 8 * k)));
  return x.v;
}
static inline vmask vgt(vf a, vf b) {
  halves x = {a}, y = {b};
  for (int k = 0; k < LP_HALVES; k++) x.h[k] = _mm256_cmp_ps(x.h[k], y.h[k], _CMP_GT_OQ);
  return x.v;
}
static inline int vany(vmask m) {
  halves x = {m};
  int any = 0;
  for (int k = 0; k < LP_HALVES; k++) any |= _mm256_movemask_ps(x.h[k]);
  return any;
}
static inline vf vblend(vf a, vf b, vmask m) {  // b where m, else a
  halves x = {a}, y = {b}, z = {m};
  for (int k = 0; k < LP_HALVES; k++) x.h[k] = _mm256_blendv_ps(x.h[k], y.h[k], z.h[k]);
  return x.v;
}
#endif

// pow2 is 2^n for integral n in [-126, 127], built in the exponent bits.
static inline vf pow2(vf n) { return (vf)(((vu)__builtin_convertvector(n, vi) + 127u) << 23); }

// times_pow2 is p * 2^n for p near 1 and integral n from exp_neg (NaN -> NaN). At 16 lanes it is
// scalef, which reaches down to underflow, so d is clamped at -120 (exp underflows to 0 there);
// at 8 lanes n must stay >= -126 for pow2, so d is clamped at -87 (exp(-87) ~ 1.6e-38 adds
// nothing next to a lane's own max, exp(0) = 1).
#if VW == 16
#define LP_LO -120.0f
static inline vf times_pow2(vf p, vf n) {
#if defined(__AVX512F__)
  return (vf)_mm512_scalef_ps((__m512)p, (__m512)n);
#else
  // scalef's bits: p * 2^n1 is exact (n1 >= -100 keeps it normal), the second product rounds
  // once, to a subnormal or 0 when 2^n is that small, as scalef rounds.
  const vf n1 = vmax(n, splat(-100.0f));
  return p * pow2(n1) * pow2(n - n1);
#endif
}
#else
#define LP_LO -87.0f
static inline vf times_pow2(vf p, vf n) { return p * pow2(n); }
#endif

// e^d for d in [LP_LO, 0] (or NaN -> NaN), relative error ~2e-7: 2^n * p(r) (NL_EXP2_C* in
// logprob.h).
static inline vf exp_neg(vf d) {
  const vf u = d * NL_LOG2E, n = vround(u), r = u - n;
  return times_pow2(NL_EXP2_POLY(r, vfma, splat), n);
}

// load2 reads elements [i, i + 2 * VW) (unscaled) into two vectors, in an order of its choice
// (the row statistics do not depend on element order). bf16 takes the cheap route: one load of
// 2 * VW values, the even elements shifted into the high halves, the odd ones masked in place;
// no widening shuffles.
static inline void load2(const void* row, int32_t dtype, int64_t i, vf* a, vf* b) {
  const uint16_t* h = (const uint16_t*)row + i;
  switch (dtype) {
    case NL_BF16: {
      vu v;
      memcpy(&v, h, sizeof v);
      *a = (vf)(v << 16);
      *b = (vf)(v & 0xffff0000u);
      break;
    }
    case NL_F16:
      *a = loadh(h);
      *b = loadh(h + VW);
      break;
    default:
      memcpy(a, (const float*)row + i, sizeof *a);
      memcpy(b, (const float*)row + i + VW, sizeof *b);
  }
}

// push adds one vector of raw values x to the lane sums s and t: y = x * inv_t rounded as the
// scalar reference rounds it (never fused into the sub: an exact x * inv_t - m can exceed 0 by
// half an ulp of m, which overflows exp for |m| > 1e9), d = y - m clamped at LP_LO so that -inf
// entries add exp(LP_LO) * LP_LO to t (0 at 16 lanes, -1.4e-36 at 8), not 0 * -inf = NaN; the
// max operand order keeps NaN (VMAXPS returns its second operand when either is NaN).
static inline __attribute__((always_inline)) void push(vf x, vf inv_t, vf m, vf* s, vf* t) {
  const vf d = vmax(splat(LP_LO), x * inv_t - m), e = exp_neg(d);
  *s += e;
  *t = vfma(e, d, *t);
}

static inline void stats(const void* row, int32_t dtype, int64_t len, float inv_tf, nl_stats* st) {
  const vf lo = splat(LP_LO), inv_t = splat(inv_tf);
  // m starts at -FLT_MAX, not -inf, so a lane that has seen only -inf entries computes
  // d = -inf - m = -inf (clamped, adds 0) rather than -inf - -inf = NaN.
  vf m = splat(-FLT_MAX);
  // Four sum pairs, one per unrolled vector: independent add chains (the adds' latency would
  // otherwise bound the loop) and a quarter of the terms per fp32 sum (smaller rounding error).
  vf s[4], t[4];
  for (int k = 0; k < 4; k++) s[k] = t[k] = splat(0.0f);
  int64_t i = 0;
  for (; i + 4 * VW <= len; i += 4 * VW) {
    vf x0, x1, x2, x3;
    load2(row, dtype, i, &x0, &x1);
    load2(row, dtype, i + 2 * VW, &x2, &x3);
    // inv_t > 0: the max of the raw values, scaled, is the max of the scaled values.
    const vf bm = vmax(vmax(x0, x1), vmax(x2, x3)) * inv_t;
    const vmask up = vgt(bm, m);  // NaN lanes never raise the max
    if (vany(up)) {
      const vf mn = vblend(m, bm, up);
      const vf d = vmax(lo, m - mn), a = exp_neg(d);
      for (int k = 0; k < 4; k++) {
        t[k] = a * vfma(d, s[k], t[k]);
        s[k] = a * s[k];
      }
      m = mn;
    }
    push(x0, inv_t, m, &s[0], &t[0]);
    push(x1, inv_t, m, &s[1], &t[1]);
    push(x2, inv_t, m, &s[2], &t[2]);
    push(x3, inv_t, m, &s[3], &t[3]);
  }
  const vf ssum = (s[0] + s[1]) + (s[2] + s[3]), tsum = (t[0] + t[1]) + (t[2] + t[3]);
  float ms[VW], ss[VW], ts[VW];
  memcpy(ms, &m, sizeof ms), memcpy(ss, &ssum, sizeof ss), memcpy(ts, &tsum, sizeof ts);
  for (int l = 0; l < VW; l++) nl_stats_merge(st, ms[l], ss[l], ts[l]);
  for (; i < len; i++) nl_stats_push(st, nl_load(row, dtype, i) * inv_tf);
}

void LP_CAT(nl_stats, SUFFIX)(const void* row, int32_t dtype, int64_t len, float inv_t, nl_stats* st) {
  switch (dtype) {  // constant dtype per call site: the compiler specializes each loop
    case NL_BF16: stats(row, NL_BF16, len, inv_t, st); break;
    case NL_F16: stats(row, NL_F16, len, inv_t, st); break;
    default: stats(row, NL_F32, len, inv_t, st);
  }
}
