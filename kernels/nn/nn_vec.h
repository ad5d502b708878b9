// SIMD row kernels written once with GCC vector extensions, included by nn_avx2.c and
// nn_avx512.c under a target pragma with VW (float lanes) and SUFFIX defined. exp and erf
// are polynomial approximations (erf: Abramowitz-Stegun 7.1.26, |error| < 1.5e-7); tails
// run through the same vector code on a padded copy, so every element takes one path.
#include <immintrin.h>
#include <math.h>
#include <string.h>
#include "nn.h"

typedef float vf __attribute__((vector_size(VW * 4)));
typedef int32_t vi __attribute__((vector_size(VW * 4)));

#define CAT2(a, b) a##_##b
#define CAT(a, b) CAT2(a, b)
#define F(name) CAT(name, SUFFIX)

static inline vf splat(float a) { return (vf){0} + a; }
static inline vf load(const float *p) { vf v; memcpy(&v, p, sizeof v); return v; }
static inline void store(float *p, vf v) { memcpy(p, &v, sizeof v); }
// loadp loads min(rem, VW) floats and fills the other lanes with pad.
static inline vf loadp(const float *p, int64_t rem, float pad) {
	if (rem >= VW) return load(p);
	vf v = splat(pad);
	memcpy(&v, p, (size_t)rem * 4);
	return v;
}
static inline void storep(float *p, vf v, int64_t rem) {
	if (rem >= VW) store(p, v);
	else memcpy(p, &v, (size_t)rem * 4);
}
// loadh loads VW binary16 values as floats (F16C); loadhp loads min(rem, VW), zero-padded.
static inline vf loadh(const uint16_t *p) {
#if VW == 16
	return (vf)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
#else
	return (vf)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
#endif
}
static inline vf loadhp(const uint16_t *p, int64_t rem) {
	if (rem >= VW) return loadh(p);
	uint16_t t[VW] = {0};
	memcpy(t, p, (size_t)rem * 2);
	return loadh(t);
}
static inline vf sel(vi m, vf a, vf b) { return (vf)((m & (vi)a) | (~m & (vi)b)); }
static inline float hsum(vf v) { float s = 0; for (int i = 0; i < VW; i++) s += v[i]; return s; }
static inline float hmax(vf v) { float m = v[0]; for (int i = 1; i < VW; i++) m = v[i] > m ? v[i] : m; return m; }

// vexp: exp with range reduction by ln2 and a degree-6 polynomial (Cephes expf); inputs
// are clamped to [-87.33, 88.37] (so exp(-inf) is ~1e-38, not 0); NaN stays NaN.
static inline vf vexp(vf x) {
	x = sel(x > 88.37f, splat(88.37f), x);
	x = sel(x < -87.33f, splat(-87.33f), x);
	vf n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; // round to nearest
	vf r = x - n * 0.693359375f - n * -2.12194440e-4f;
	vf p = splat(1.9875691500E-4f);
	p = p * r + 1.3981999507E-3f;
	p = p * r + 8.3334519073E-3f;
	p = p * r + 4.1665795894E-2f;
	p = p * r + 1.6666665459E-1f;
	p = p * r + 5.0000001201E-1f;
	vf y = p * r * r + r + 1.0f;
	vi e = (__builtin_convertvector(n, vi) + 127) << 23;
	return y * (vf)e;
}

static inline vf vgelu(vf x) {
	vf z = x * 0.70710678118654752f;
	vi sign = (vi)z & (int32_t)0x80000000;
	vf az = (vf)((vi)z & 0x7fffffff);
	vf t = 1.0f / (1.0f + 0.3275911f * az);
	vf p = splat(1.061405429f);
	p = p * t - 1.453152027f;
	p = p * t + 1.421413741f;
	p = p * t - 0.284496736f;
	p = p * t + 0.254829592f;
	vf erf = 1.0f - p * t * vexp(-az * az);
	erf = (vf)((vi)erf | sign);
	return 0.5f * x * (1.0f + erf);
}

static void F(add_layernorm)(float *dst, const float *x, const float *bias, const float *res,
                             const float *gamma, const float *beta, int64_t n, float eps) {
	vf sum = splat(0);
	for (int64_t i = 0; i < n; i += VW) {
		vf v = loadp(x + i, n - i, 0);
		if (bias) v += loadp(bias + i, n - i, 0);
		if (res) v += loadp(res + i, n - i, 0);
		storep(dst + i, v, n - i);
		sum += v;
	}
	float mean = hsum(sum) / (float)n;
	vf var = splat(0);
	for (int64_t i = 0; i < n; i += VW) {
		vf d = loadp(dst + i, n - i, mean) - mean;
		var += d * d;
	}
	float rstd = 1.0f / sqrtf(hsum(var) / (float)n + eps);
	for (int64_t i = 0; i < n; i += VW) {
		vf v = (loadp(dst + i, n - i, 0) - mean) * rstd;
		storep(dst + i, v * loadp(gamma + i, n - i, 0) + loadp(beta + i, n - i, 0), n - i);
	}
}

static void F(bias_act)(float *x, const float *bias, int64_t n, int act) {
	for (int64_t i = 0; i < n; i += VW) {
		vf v = loadp(x + i, n - i, 0);
		if (bias) v += loadp(bias + i, n - i, 0);
		storep(x + i, act == NN_ACT_GELU ? vgelu(v) : v, n - i);
	}
}

static void F(softmax)(float *x, int64_t n, int64_t valid, float scale) {
	if (valid > 0) {
		vf m = splat(-__builtin_inff());
		for (int64_t i = 0; i < valid; i += VW) {
			vf v = loadp(x + i, valid - i, -__builtin_inff());
			m = sel(v > m, v, m);
		}
		float mx = hmax(m);
		vf sum = splat(0);
		for (int64_t i = 0; i < valid; i += VW) {
			vf e = vexp((loadp(x + i, valid - i, mx) - mx) * scale);
			if (valid - i < VW) // padded lanes must not count
				for (int j = (int)(valid - i); j < VW; j++) e[j] = 0;
			storep(x + i, e, valid - i);
			sum += e;
		}
		float inv = 1.0f / hsum(sum);
		for (int64_t i = 0; i < valid; i += VW) storep(x + i, loadp(x + i, valid - i, 0) * inv, valid - i);
	}
	if (n > valid) memset(x + valid, 0, (size_t)(n - valid) * 4);
}

static void F(add)(float *acc, const float *x, int64_t n) {
	for (int64_t i = 0; i < n; i += VW) storep(acc + i, loadp(acc + i, n - i, 0) + loadp(x + i, n - i, 0), n - i);
}

static void F(scale)(float *x, int64_t n, float s) {
	for (int64_t i = 0; i < n; i += VW) storep(x + i, loadp(x + i, n - i, 0) * s, n - i);
}

static float F(sumsq)(const float *x, int64_t n) {
	vf s = splat(0);
	for (int64_t i = 0; i < n; i += VW) {
		vf v = loadp(x + i, n - i, 0);
		s += v * v;
	}
	return hsum(s);
}

// sum4 writes the lane sums of a, b, c and d to out[0..3]: two shuffle levels halve the
// lanes of all four at once, then each sum adds its last VW/4 lanes.
static inline void sum4(vf a, vf b, vf c, vf d, float *out) {
#if VW == 16
	vf ab = __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
	        __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
	vf cd = __builtin_shufflevector(c, d, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
	        __builtin_shufflevector(c, d, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
	vf q = __builtin_shufflevector(ab, cd, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
	       __builtin_shufflevector(ab, cd, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
#else
	vf ab = __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11) + __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15);
	vf cd = __builtin_shufflevector(c, d, 0, 1, 2, 3, 8, 9, 10, 11) + __builtin_shufflevector(c, d, 4, 5, 6, 7, 12, 13, 14, 15);
	vf q = __builtin_shufflevector(ab, cd, 0, 1, 4, 5, 8, 9, 12, 13) + __builtin_shufflevector(ab, cd, 2, 3, 6, 7, 10, 11, 14, 15);
#endif
	for (int k = 0; k < 4; k++) {
		float s = 0;
		for (int j = 0; j < VW / 4; j++) s += q[k * (VW / 4) + j];
		out[k] = s;
	}
}

// Input rows per dot_block: as many accumulators as the registers hold (32 zmm, 16 ymm).
#define ROWS_BLOCK (VW == 16 ? 4 : 2)

// dot_step adds x[r, i:i+VW] . w[k, i:i+VW] into acc[r][k] (rem: floats left in the row).
static inline __attribute__((always_inline)) void F(dot_step)(vf acc[ROWS_BLOCK][4], const float *x,
		const uint16_t *w, int nr, int no, int64_t in, int64_t i, int64_t rem) {
	vf wv[4];
	for (int k = 0; k < no; k++) {
		wv[k] = loadhp(w + k * in + i, rem);
		__builtin_prefetch(w + (4 + k) * in + i);
	}
	for (int r = 0; r < nr; r++) {
		vf xv = loadp(x + r * in + i, rem, 0);
		for (int k = 0; k < no; k++) acc[r][k] += xv * wv[k];
	}
}

// dot_block writes y[r*ldy + k] = x[r,:] . w[k,:] for nr <= ROWS_BLOCK input rows and
// no <= 4 weight rows. Inlined with constant nr and no, the accumulators stay in registers
// and each weight vector loaded serves nr FMAs.
static inline __attribute__((always_inline)) void F(dot_block)(const float *x, const uint16_t *w, float *y,
		int nr, int no, int64_t in, int64_t ldy) {
	vf acc[ROWS_BLOCK][4];
	for (int r = 0; r < ROWS_BLOCK; r++)
		for (int k = 0; k < 4; k++) acc[r][k] = splat(0);
	int64_t i = 0;
	for (; i + VW <= in; i += VW) F(dot_step)(acc, x, w, nr, no, in, i, VW);
	if (i < in) F(dot_step)(acc, x, w, nr, no, in, i, in - i);
	for (int r = 0; r < nr; r++) {
		float s[4];
		sum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3], s);
		for (int k = 0; k < no; k++) y[r * ldy + k] = s[k];
	}
}

// dot_rows_of runs dot_block over all input rows for no weight rows at o.
static inline __attribute__((always_inline)) void F(dot_rows_of)(const float *x, const uint16_t *w, float *y,
		int64_t rows, int no, int64_t in, int64_t ldy) {
	int64_t r = 0;
	for (; r + ROWS_BLOCK <= rows; r += ROWS_BLOCK) F(dot_block)(x + r * in, w, y + r * ldy, ROWS_BLOCK, no, in, ldy);
	switch (rows - r) { // the leftover rows, each count with its own inlined block
	case 3: F(dot_block)(x + r * in, w, y + r * ldy, 3 % ROWS_BLOCK, no, in, ldy); break;
	case 2: F(dot_block)(x + r * in, w, y + r * ldy, 2 % ROWS_BLOCK, no, in, ldy); break;
	case 1: F(dot_block)(x + r * in, w, y + r * ldy, 1, no, in, ldy); break;
	}
}

// dot_rows walks the weight rows four at a time; their 4*in halves stay in L1 (or L2) while
// every input row is dotted with them, so each weight is read from memory once.
static void F(dot_rows)(const float *x, const uint16_t *w, float *y, int64_t rows, int64_t in,
                        int64_t o0, int64_t o1, int64_t ldy) {
	int64_t o = o0;
	for (; o + 4 <= o1; o += 4) F(dot_rows_of)(x, w + o * in, y + o, rows, 4, in, ldy);
	for (; o < o1; o++) F(dot_rows_of)(x, w + o * in, y + o, rows, 1, in, ldy);
}

static void F(half_to_float)(float *dst, const uint16_t *src, int64_t n) {
	for (int64_t i = 0; i < n; i += VW) storep(dst + i, loadhp(src + i, n - i), n - i);
}

static void F(float_to_half)(uint16_t *dst, const float *src, int64_t n) {
	for (int64_t i = 0; i < n; i += VW) {
		vf v = loadp(src + i, n - i, 0);
#if VW == 16
		__m256i h = _mm512_cvtps_ph((__m512)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
		__m128i h = _mm256_cvtps_ph((__m256)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#endif
		memcpy(dst + i, &h, (size_t)(n - i < VW ? n - i : VW) * 2);
	}
}

const nn_ops CAT(nn_ops, SUFFIX) = {F(add_layernorm), F(bias_act), F(softmax), F(add),           F(scale),
                                    F(sumsq),         F(dot_rows), F(half_to_float), F(float_to_half)};
