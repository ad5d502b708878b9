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
// loadp loads min(rem, VW) floats (rem > 0) and fills the other lanes with pad; storep stores
// min(rem, VW). Masked moves: a memcpy per tail cost more than the arithmetic of short rows
// (a query's softmax rows are a dozen scores).
#if VW == 16
static inline __mmask16 tail_mask(int64_t rem) { return (__mmask16)((1u << rem) - 1); }
static inline vf loadp(const float *p, int64_t rem, float pad) {
	if (rem >= VW) return load(p);
	return (vf)_mm512_mask_loadu_ps(_mm512_set1_ps(pad), tail_mask(rem), p);
}
static inline void storep(float *p, vf v, int64_t rem) {
	if (rem >= VW) store(p, v);
	else _mm512_mask_storeu_ps(p, tail_mask(rem), (__m512)v);
}
#else
static inline __m256i tail_mask(int64_t rem) {
	return (__m256i)((vi){0, 1, 2, 3, 4, 5, 6, 7} < (int32_t)rem);
}
static inline vf loadp(const float *p, int64_t rem, float pad) {
	if (rem >= VW) return load(p);
	const __m256i m = tail_mask(rem);
	return (vf)_mm256_blendv_ps(_mm256_set1_ps(pad), _mm256_maskload_ps(p, m), (__m256)m);
}
static inline void storep(float *p, vf v, int64_t rem) {
	if (rem >= VW) store(p, v);
	else _mm256_maskstore_ps(p, tail_mask(rem), (__m256)v);
}
#endif
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
// Horizontal sum and max by halving (log2(VW) shuffles): a scalar loop over the lanes was a
// chain of VW dependent adds, the cost of a short row's whole softmax.
#if VW == 16
static inline float hsum(vf v) { return _mm512_reduce_add_ps((__m512)v); }
static inline float hmax(vf v) { return _mm512_reduce_max_ps((__m512)v); }
#else
static inline float hsum(vf v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128((__m256)v), _mm256_extractf128_ps((__m256)v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
static inline float hmax(vf v) {
	__m128 m = _mm_max_ps(_mm256_castps256_ps128((__m256)v), _mm256_extractf128_ps((__m256)v, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
#endif

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

// softmax_row is softmax (nn.h), inlined where a kernel runs it on short rows. Padded lanes
// load -inf, whose vexp is ~1e-38: next to the row maximum's exp(0) = 1 in the sum it changes
// no bit.
static inline __attribute__((always_inline)) void F(softmax_row)(float *x, int64_t n, int64_t valid, float scale) {
	if (valid > 0) {
		vf m = splat(-__builtin_inff());
		for (int64_t i = 0; i < valid; i += VW) {
			vf v = loadp(x + i, valid - i, -__builtin_inff());
			m = sel(v > m, v, m);
		}
		float mx = hmax(m);
		vf sum = splat(0);
		for (int64_t i = 0; i < valid; i += VW) {
			vf e = vexp((loadp(x + i, valid - i, -__builtin_inff()) - mx) * scale);
			storep(x + i, e, valid - i);
			sum += e;
		}
		float inv = 1.0f / hsum(sum);
		for (int64_t i = 0; i < valid; i += VW) storep(x + i, loadp(x + i, valid - i, 0) * inv, valid - i);
	}
	if (n > valid) memset(x + valid, 0, (size_t)(n - valid) * 4);
}

static void F(softmax)(float *x, int64_t n, int64_t valid, float scale) { F(softmax_row)(x, n, valid, scale); }

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

// vfma is a * b + c with one rounding: every GEMM here accumulates by FMA chains written out,
// never by `acc += a * b` left to the compiler's contraction, so that each output's bits
// depend only on its own row and the weights (batch invariance, nn.h).
#if VW == 16
static inline vf vfma(vf a, vf b, vf c) { return (vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c); }
#else
static inline vf vfma(vf a, vf b, vf c) { return (vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c); }
#endif

// A GEMM block is BLOCK_VECS vectors of VW adjacent outputs (two panels of 16 at 16 lanes, one
// at 8) by a few rows; its accumulators fill the registers.
#define BLOCK_VECS 2

// store_block stores act(acc * xs[r] + b) (one rounding; xs NULL: acc + b) of a block's
// accumulators for the outputs below out.
static inline __attribute__((always_inline)) void F(store_block)(vf acc[][BLOCK_VECS], const float *xs, const float *b,
		float *y, int nr, int nv, int64_t o0, int64_t out, int act) {
	for (int v = 0; v < nv; v++) {
		const int64_t o = o0 + v * VW, rem = out - o;
		if (rem <= 0) continue; // padding outputs
		const vf bv = b ? loadp(b + o, rem, 0) : splat(0);
		for (int r = 0; r < nr; r++) {
			vf f = xs ? vfma(acc[r][v], splat(xs[r]), bv) : acc[r][v] + bv;
			storep(y + r * out + o, act == NN_ACT_GELU ? vgelu(f) : f, rem);
		}
	}
}

// The fp16 Linear's GEMM on packed panels (nn.h): a block is BLOCK_VECS vectors of adjacent
// outputs by up to DOT_ROWS input rows. For each input column i, the block's weights are
// loaded and converted once (F16C: measured as fast as a float32 copy made per batch, which
// costs its own pass) and serve every row, whose x[r, i] is broadcast straight from xt (x
// transposed by nn_linear, so one pointer reaches all rows): no horizontal sums, no shuffles.
// Each output is one FMA chain over i = 0..in-1 from +0, then + b and act: the same bits for
// a row alone or among any others, whatever block it falls in.
#if VW == 16
#define DOT_ROWS 12
#else
#define DOT_ROWS 6
#endif

// bcast loads *p into every lane (vbroadcastss from memory: a load, no shuffle).
static inline vf bcast(const float *p) {
#if VW == 16
	return (vf)_mm512_set1_ps(*p);
#else
	return (vf)_mm256_set1_ps(*p);
#endif
}

// dot_block writes y[r*out + o] for the nr rows whose transposed columns start at xt (stride
// NN_XT_ROWS) and the nv vectors of outputs at w, the first being output o0 (outputs at or
// past out are padding and are not stored). Inlined with constant nr and nv, the accumulators
// stay in registers.
static inline __attribute__((always_inline)) void F(dot_block)(const float *xt, const uint16_t *w, const float *b,
		float *y, int nr, int nv, int64_t in, int64_t o0, int64_t out, int act) {
	int64_t off[BLOCK_VECS]; // vector v: panel (v*VW)/16, lanes from (v*VW)%16
	for (int v = 0; v < nv; v++) off[v] = (v * VW / NN_PANEL) * in * NN_PANEL + (v * VW) % NN_PANEL;
	vf acc[DOT_ROWS][BLOCK_VECS];
	for (int r = 0; r < nr; r++)
		for (int v = 0; v < nv; v++) acc[r][v] = splat(0);
	for (int64_t i = 0; i < in; i++) {
		vf wi[BLOCK_VECS];
		for (int v = 0; v < nv; v++) {
			wi[v] = loadh(w + off[v] + i * NN_PANEL);
			__builtin_prefetch(w + off[v] + (i + 32) * NN_PANEL);
		}
		const float *xi = xt + i * NN_XT_ROWS;
		for (int r = 0; r < nr; r++) {
			vf xb = bcast(xi + r);
			for (int v = 0; v < nv; v++) acc[r][v] = vfma(xb, wi[v], acc[r][v]);
		}
	}
	F(store_block)(acc, NULL, b, y, nr, nv, o0, out, act);
}

// ROW_CASES(n, C) is C(k) for every row count k = 1..n of a block (n a literal): the cases of
// a switch that gives each row count its own inlined block.
#define ROWS_4(C) C(1) C(2) C(3) C(4)
#define ROWS_6(C) ROWS_4(C) C(5) C(6)
#define ROWS_8(C) ROWS_6(C) C(7) C(8)
#define ROWS_12(C) ROWS_8(C) C(9) C(10) C(11) C(12)
#define ROW_CASES2(n, C) ROWS_##n(C)
#define ROW_CASES(n, C) ROW_CASES2(n, C)

// dot_rows_of runs the blocks of nv vectors at w over all rows, DOT_ROWS at a time.
#define DOT_CASE(n) case n: F(dot_block)(xb, w, b, y + r * out, n, nv, in, o0, out, act); break;
static inline __attribute__((always_inline)) void F(dot_rows_of)(const float *xt, const uint16_t *w, const float *b,
		float *y, int64_t rows, int nv, int64_t in, int64_t o0, int64_t out, int act) {
	for (int64_t r = 0; r < rows; r += DOT_ROWS) {
		const float *xb = xt + (r / NN_XT_ROWS) * in * NN_XT_ROWS + r % NN_XT_ROWS;
		switch (rows - r < DOT_ROWS ? rows - r : DOT_ROWS) { ROW_CASES(DOT_ROWS, DOT_CASE) }
	}
}
#undef DOT_CASE

static void F(dot_panels)(const float *x, const float *xt, const uint16_t *w, const float *b, float *y, int64_t rows,
                          int64_t in, int64_t p0, int64_t p1, int64_t out, int act) {
	(void)x; // the vector kernels read xt
	const int64_t block = BLOCK_VECS * VW / NN_PANEL; // panels per block
	int64_t p = p0;
	for (; p + block <= p1; p += block)
		F(dot_rows_of)(xt, w + p * in * NN_PANEL, b, y, rows, BLOCK_VECS, in, p * NN_PANEL, out, act);
	for (; p < p1; p++) F(dot_rows_of)(xt, w + p * in * NN_PANEL, b, y, rows, NN_PANEL / VW, in, p * NN_PANEL, out, act);
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

static void F(quantize_row)(int16_t *a, const float *x, int64_t n, float *scale) {
	vf mx = splat(0);
	for (int64_t i = 0; i < n; i += VW) {
		vf v = (vf)((vi)loadp(x + i, n - i, 0) & 0x7fffffff);
		mx = sel(v > mx, v, mx);
	}
	const float M = hmax(mx);
	const int32_t m = NN_Q8_AMAX;
	*scale = M > 0 ? M / (float)m : 1;
	const float inv = M > 0 ? (float)m / M : 0;
	typedef int16_t vi16 __attribute__((vector_size(VW * 2)));
	for (int64_t i = 0; i < NN_Q8_K(n); i += VW) { // NN_Q8_K(n) is a multiple of VW
		vf v = (i < n ? loadp(x + i, n - i, 0) : splat(0)) * inv; // padding: x 0, so a 0
#if VW == 16
		vi q = (vi)_mm512_cvtps_epi32((__m512)v); // rounds to nearest even, as rintf
#else
		vi q = (vi)_mm256_cvtps_epi32((__m256)v);
#endif
		vi lo = q < -m, hi = q > m;
		q = (q & ~(lo | hi)) | (-m & lo) | (m & hi);
		vi16 h = __builtin_convertvector(q, vi16);
		memcpy(a + i, &h, sizeof h);
	}
}

// The pair GEMMs (nn.h): int8 weights on int16 activations (dot_q8) and bf16 weights on bf16
// activations (dot_bf16) share one blocking. A block is BLOCK_VECS vectors of VW outputs by up to
// Q8_ROWS or BF_ROWS rows; per pair of inputs the block's weights are loaded once (int8:
// sign-extended to int16) and serve every row, whose pair of activations is broadcast to every
// lane: one vpdpwssd (AVX512_VNNI; else vpmaddwd + vpaddd, the same exact int32 sums) or
// vdpbf16ps per row and vector. int8 sums each group of NN_Q8_GROUP inputs in int32, then adds
// it, scaled, into a float accumulator. The epilogue dequantizes (int8), adds the bias and
// applies GELU on the accumulators before the store.
// Rows per block: the accumulators (int8: int32 and float ones), the block's weights (and
// int8's group scales), one broadcast and one product fit the 32 zmm registers. AVX2's 16 ymm
// cannot hold int8's 4 rows; measured on Zen 4 (1 thread, FFN-in shape), 4 rows with spills
// beat 2 without (117 vs 85-93 GOP/s).
#if VW == 16
#define Q8_ROWS 6
#define BF_ROWS 8
#else
#define Q8_ROWS 4
#define BF_ROWS 4
#endif
#if VW == 16
typedef __m512i vq;
static inline vq q_load(const int8_t *p) { return _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p)); }
static inline vq pair_bcast(const uint16_t *p) { int32_t v; memcpy(&v, p, 4); return _mm512_set1_epi32(v); }
#ifdef __AVX512VNNI__
static inline vi q_dot(vi acc, vq a, vq w) { return (vi)_mm512_dpwssd_epi32((__m512i)acc, a, w); }
#else
static inline vi q_dot(vi acc, vq a, vq w) { return acc + (vi)_mm512_madd_epi16(a, w); }
#endif
#else
typedef __m256i vq;
static inline vq q_load(const int8_t *p) { return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p)); }
static inline vq pair_bcast(const uint16_t *p) { int32_t v; memcpy(&v, p, 4); return _mm256_set1_epi32(v); }
static inline vi q_dot(vi acc, vq a, vq w) { return acc + (vi)_mm256_madd_epi16(a, w); }
#endif
#ifdef __AVX512BF16__
static inline vq bf_load(const uint16_t *p) { return _mm512_loadu_si512(p); }
static inline vf bf_dot(vf acc, vq a, vq w) { return (vf)_mm512_dpbf16_ps((__m512)acc, (__m512bh)a, (__m512bh)w); }
#endif

// The vectors of a block: vector v of panel-packed weights w (elements of `size` bytes, rows
// of k) covers panel (v*VW)/16, outputs from (v*VW)%16.
static inline const char *F(pair_vec)(const void *w, int v, int64_t k, int size) {
	return (const char *)w + ((v * VW / NN_PANEL) * k * NN_PANEL + (v * VW) % NN_PANEL * 2) * size;
}

// q8_block writes y[r*out + o] for nr rows of a (k values each) and the nv vectors of outputs
// at w, the first being output o0, with the group scales ws of w's panels; inlined with
// constant nr and nv, the accumulators stay in registers.
static inline __attribute__((always_inline)) void F(q8_block)(const int16_t *a, const float *xs, const int8_t *w,
		const float *ws, const float *b, float *y, int nr, int nv, int64_t k, int64_t o0, int64_t out, int act) {
	const char *wv[BLOCK_VECS];
	const float *sv[BLOCK_VECS]; // the scales of vector v's outputs, group 0
	for (int v = 0; v < nv; v++) {
		wv[v] = F(pair_vec)(w, v, k, 1);
		sv[v] = ws + (v * VW / NN_PANEL) * (k / NN_Q8_GROUP) * NN_PANEL + (v * VW) % NN_PANEL;
	}
	vf acc[Q8_ROWS][BLOCK_VECS];
	for (int r = 0; r < nr; r++)
		for (int v = 0; v < nv; v++) acc[r][v] = splat(0);
	for (int64_t g0 = 0; g0 < k; g0 += NN_Q8_GROUP) {
		vi sum[Q8_ROWS][BLOCK_VECS];
		for (int r = 0; r < nr; r++)
			for (int v = 0; v < nv; v++) sum[r][v] = (vi){0};
		for (int64_t g = g0; g < g0 + NN_Q8_GROUP; g += 2) {
			vq wg[BLOCK_VECS];
			for (int v = 0; v < nv; v++) wg[v] = q_load((const int8_t *)wv[v] + g * NN_PANEL);
			for (int r = 0; r < nr; r++) {
				vq ab = pair_bcast((const uint16_t *)a + r * k + g);
				for (int v = 0; v < nv; v++) sum[r][v] = q_dot(sum[r][v], ab, wg[v]);
			}
		}
		for (int v = 0; v < nv; v++) {
			const vf s = load(sv[v] + g0 / NN_Q8_GROUP * NN_PANEL);
			for (int r = 0; r < nr; r++) acc[r][v] = vfma(__builtin_convertvector(sum[r][v], vf), s, acc[r][v]);
		}
	}
	F(store_block)(acc, xs, b, y, nr, nv, o0, out, act);
}

#ifdef __AVX512BF16__
// bf16_block is q8_block for bf16 weights and activations: float accumulators, no scales.
static inline __attribute__((always_inline)) void F(bf16_block)(const uint16_t *a, const uint16_t *w, const float *b,
		float *y, int nr, int nv, int64_t k, int64_t o0, int64_t out, int act) {
	const char *wv[BLOCK_VECS];
	for (int v = 0; v < nv; v++) wv[v] = F(pair_vec)(w, v, k, 2);
	vf acc[BF_ROWS][BLOCK_VECS];
	for (int r = 0; r < nr; r++)
		for (int v = 0; v < nv; v++) acc[r][v] = splat(0);
	for (int64_t g = 0; g < k; g += 2) {
		vq wg[BLOCK_VECS];
		for (int v = 0; v < nv; v++) wg[v] = bf_load((const uint16_t *)wv[v] + g * NN_PANEL);
		for (int r = 0; r < nr; r++) {
			vq ab = pair_bcast(a + r * k + g);
			for (int v = 0; v < nv; v++) acc[r][v] = bf_dot(acc[r][v], ab, wg[v]);
		}
	}
	F(store_block)(acc, NULL, b, y, nr, nv, o0, out, act);
}
#endif

// Q8_CASE / BF_CASE give each row count of a block its own inlined block.
#define Q8_CASE(n) case n: F(q8_block)(a + r * k, xs + r, w, ws, b, y + r * out, n, nv, k, o0, out, act); break;
static inline __attribute__((always_inline)) void F(q8_rows_of)(const int16_t *a, const float *xs, const int8_t *w,
		const float *ws, const float *b, float *y, int64_t rows, int nv, int64_t k, int64_t o0, int64_t out, int act) {
	for (int64_t r = 0; r < rows; r += Q8_ROWS) {
		switch (rows - r < Q8_ROWS ? rows - r : Q8_ROWS) { ROW_CASES(Q8_ROWS, Q8_CASE) }
	}
}
#undef Q8_CASE

static void F(dot_q8)(const int16_t *a, const float *xs, const int8_t *w, const float *ws, const float *b,
                      float *y, int64_t rows, int64_t k, int64_t p0, int64_t p1, int64_t out, int act) {
	const int64_t block = BLOCK_VECS * VW / NN_PANEL, wp = k * NN_PANEL, sp = k / NN_Q8_GROUP * NN_PANEL; // per panel
	int64_t p = p0;
	for (; p + block <= p1; p += block)
		F(q8_rows_of)(a, xs, w + p * wp, ws + p * sp, b, y, rows, BLOCK_VECS, k, p * NN_PANEL, out, act);
	for (; p < p1; p++)
		F(q8_rows_of)(a, xs, w + p * wp, ws + p * sp, b, y, rows, NN_PANEL / VW, k, p * NN_PANEL, out, act);
}

#ifdef __AVX512BF16__
#define BF_CASE(n) case n: F(bf16_block)(a + r * k, w, b, y + r * out, n, nv, k, o0, out, act); break;
static inline __attribute__((always_inline)) void F(bf16_rows_of)(const uint16_t *a, const uint16_t *w, const float *b,
		float *y, int64_t rows, int nv, int64_t k, int64_t o0, int64_t out, int act) {
	for (int64_t r = 0; r < rows; r += BF_ROWS) {
		switch (rows - r < BF_ROWS ? rows - r : BF_ROWS) { ROW_CASES(BF_ROWS, BF_CASE) }
	}
}
#undef BF_CASE

static void F(dot_bf16)(const uint16_t *a, const uint16_t *w, const float *b, float *y, int64_t rows, int64_t k,
                        int64_t p0, int64_t p1, int64_t out, int act) {
	const int64_t block = BLOCK_VECS * VW / NN_PANEL, wp = k * NN_PANEL;
	int64_t p = p0;
	for (; p + block <= p1; p += block) F(bf16_rows_of)(a, w + p * wp, b, y, rows, BLOCK_VECS, k, p * NN_PANEL, out, act);
	for (; p < p1; p++) F(bf16_rows_of)(a, w + p * wp, b, y, rows, NN_PANEL / VW, k, p * NN_PANEL, out, act);
}

static void F(round_bf16)(uint16_t *a, const float *x, int64_t n) {
	for (int64_t i = 0; i < NN_BF16_K(n); i += VW) { // every i < NN_BF16_K(n) is < n: both step by multiples of 2
		__m256bh h = _mm512_cvtneps_pbh((__m512)loadp(x + i, n - i, 0));
		const int64_t k = NN_BF16_K(n) - i;
		memcpy(a + i, &h, (size_t)(k < VW ? k : VW) * 2); // padding lanes: x 0, so a 0
	}
}
#ifdef __AMX_BF16__
// The amx level: the bf16 GEMM on tiles (nn_tiles.h), the rest of the level as avx512bf16's.
#define TILE_CONFIG(c) _tile_loadconfig(c)
#define TILE_ZERO(t) _tile_zero(t)
#define TILE_LOAD(t, p, stride) _tile_loadd(t, p, stride)
#define TILE_DPBF16PS(c, a, b) _tile_dpbf16ps(c, a, b)
#define TILE_STORE(t, p, stride) _tile_stored(t, p, stride)
#define TILE_RELEASE() _tile_release()
#include "nn_tiles.h"

// tiles_store is the tile blocks' epilogue: store_block's bias and act on the sums.
static void tiles_store(const float *c, int m, int np, const float *b, float *y, int64_t o0, int64_t out, int act) {
	vf acc[TILE_ROWS][BLOCK_VECS];
	for (int r = 0; r < m; r++)
		for (int v = 0; v < np; v++) acc[r][v] = load(c + r * TILE_BLOCK + v * VW);
	F(store_block)(acc, NULL, b, y, m, np, o0, out, act);
}

// dot_bf16_tiles is dot_bf16 on tiles where k is whole chunks of TILE_K (a choice by k alone,
// so a row's bits still do not depend on its batch).
static void F(dot_bf16_tiles)(const uint16_t *a, const uint16_t *w, const float *b, float *y, int64_t rows, int64_t k,
                              int64_t p0, int64_t p1, int64_t out, int act) {
	if (k % TILE_K) F(dot_bf16)(a, w, b, y, rows, k, p0, p1, out, act);
	else tiles_dot_bf16(a, w, b, y, rows, k, p0, p1, out, act, tiles_store);
}
#define BF16_OPS F(round_bf16), F(dot_bf16_tiles)
#else
#define BF16_OPS F(round_bf16), F(dot_bf16)
#endif
#else
#define BF16_OPS NULL, NULL
#endif
// peak_ops (nn.h): PEAK_ACC independent accumulators, each fed back into its own instruction so
// that none can be merged or hoisted: fp16's Linear multiplies in fp32 FMAs, int8's with
// vpmaddwd + vpaddd (vpdpwssd with VNNI), bf16's with vdpbf16ps. AVX2 gets 8: an int8 pair
// needs a register for its product besides the accumulator, and with 12 accumulators in the
// 16 ymm registers they spilled, so the int8 "peak" came out at 60-75% of a spill-free loop's
// (the int8 Linear measured 110% of it); 8 chains still keep both FMA pipes busy.
#if VW == 8
#define PEAK_ACC 8
#else
#define PEAK_ACC 12
#endif
static inline __attribute__((always_inline)) double F(peak_loop)(int fmt, int64_t iters) {
	vf acc[PEAK_ACC], y = splat(1.0f / 3);
	for (int j = 0; j < PEAK_ACC; j++) acc[j] = splat((float)j + 1);
	for (int64_t i = 0; i < iters; i++)
		for (int j = 0; j < PEAK_ACC; j++) {
#ifdef __AVX512BF16__
			if (fmt == NN_BF16) {
				acc[j] = bf_dot(acc[j], (vq)acc[j], (vq)y);
				continue;
			}
#endif
			if (fmt == NN_INT8) acc[j] = (vf)q_dot((vi)acc[j], (vq)acc[j], (vq)y);
			else acc[j] = vfma(acc[j], y, acc[j]);
		}
	for (int j = 0; j < PEAK_ACC; j++) __asm__ volatile("" : : "x"(acc[j])); // the sums are used
	return 2.0 * iters * PEAK_ACC * (fmt == NN_FP16 ? VW : 2 * VW);
}

#ifdef __AMX_BF16__
// tiles_peak runs iters rounds of TDPBF16PS into 4 independent C tiles (0-3) from one A (4) and
// one B (5) of 16 x 64 bytes: 16 x 16 x 32 multiply-adds each.
static double tiles_peak(int64_t iters) {
	static const uint16_t ab[TILE_ROWS * TILE_K]; // zeros: the rate does not depend on the values
	tile_config c;
	memset(&c, 0, sizeof c);
	c.palette = 1;
	for (int t = 0; t < 6; t++) c.colsb[t] = 64, c.rows[t] = 16;
	_tile_loadconfig(&c);
	_tile_loadd(4, ab, 64);
	_tile_loadd(5, ab, 64);
	for (int64_t i = 0; i < iters; i++) {
		_tile_dpbf16ps(0, 4, 5);
		_tile_dpbf16ps(1, 4, 5);
		_tile_dpbf16ps(2, 4, 5);
		_tile_dpbf16ps(3, 4, 5);
	}
	_tile_release();
	return 2.0 * iters * 4 * TILE_ROWS * NN_PANEL * TILE_K;
}
#endif

static double F(peak_ops)(int fmt, int64_t iters) {
	switch (fmt) {
	case NN_FP16: return F(peak_loop)(NN_FP16, iters);
	case NN_INT8: return F(peak_loop)(NN_INT8, iters);
#ifdef __AMX_BF16__
	case NN_BF16: return tiles_peak(iters);
#elif defined(__AVX512BF16__)
	case NN_BF16: return F(peak_loop)(NN_BF16, iters);
#endif
	}
	return 0;
}

// attend (nn.h) in fp32 without BLAS: no GEMM call per (sequence, head), as short sequences
// (queries, glosses) paid more in calls than in arithmetic. K is transposed once into
// kt[hd][Lp] (Lp: L rounded up to a block of keys, zero padded). Then NN_ATT_ROWS query rows
// at a time: their scores, ATT_VECS vectors of keys at a time, from broadcasts of q[i][c]
// times vectors of kt[c]; the rows' softmax; their context, ATT_VECS vectors of width at a
// time, from broadcasts of the scores times vectors of v rows. Every block is NN_ATT_ROWS x
// ATT_VECS independent accumulators in registers (rows past L read a zero row, and are not
// stored).
#define ATT_VECS 2
static void F(attend)(const float *q, const float *k, const float *v, int64_t ld, float *ctx, int64_t ldc, int64_t L,
                      int64_t hd, float scale, float *scratch) {
	const int64_t Lp = nn_head_keys(L);
	float *kt = scratch, *s = scratch + hd * Lp; // s: NN_ATT_ROWS rows of Lp scores
	for (int64_t c = 0; c < hd; c++) {
		float *row = kt + c * Lp;
		for (int64_t j = 0; j < L; j++) row[j] = k[j * ld + c];
		memset(row + L, 0, (size_t)(Lp - L) * sizeof(float));
	}
	static const float zero[NN_ATT_MAX_HD];
	for (int64_t i0 = 0; i0 < L; i0 += NN_ATT_ROWS) {
		const int64_t nr = L - i0 < NN_ATT_ROWS ? L - i0 : NN_ATT_ROWS;
		const float *qr[NN_ATT_ROWS];
		for (int r = 0; r < NN_ATT_ROWS; r++) qr[r] = r < nr ? q + (i0 + r) * ld : zero;
		for (int64_t j0 = 0; j0 < Lp; j0 += ATT_VECS * VW) {
			vf acc[NN_ATT_ROWS][ATT_VECS];
			for (int r = 0; r < NN_ATT_ROWS; r++)
				for (int u = 0; u < ATT_VECS; u++) acc[r][u] = splat(0);
			for (int64_t c = 0; c < hd; c++) {
				vf kc[ATT_VECS];
				for (int u = 0; u < ATT_VECS; u++) kc[u] = load(kt + c * Lp + j0 + u * VW);
				for (int r = 0; r < NN_ATT_ROWS; r++) {
					const vf qc = bcast(qr[r] + c);
					for (int u = 0; u < ATT_VECS; u++) acc[r][u] = vfma(qc, kc[u], acc[r][u]);
				}
			}
			for (int r = 0; r < NN_ATT_ROWS; r++)
				for (int u = 0; u < ATT_VECS; u++) store(s + r * Lp + j0 + u * VW, acc[r][u]);
		}
		for (int r = 0; r < nr; r++) F(softmax_row)(s + r * Lp, L, L, scale);
		for (int64_t c0 = 0; c0 < hd; c0 += ATT_VECS * VW) {
			vf acc[NN_ATT_ROWS][ATT_VECS];
			for (int r = 0; r < NN_ATT_ROWS; r++)
				for (int u = 0; u < ATT_VECS; u++) acc[r][u] = splat(0);
			for (int64_t j = 0; j < L; j++) {
				vf vj[ATT_VECS];
				for (int u = 0; u < ATT_VECS; u++)
					vj[u] = c0 + u * VW < hd ? loadp(v + j * ld + c0 + u * VW, hd - c0 - u * VW, 0) : splat(0);
				for (int r = 0; r < NN_ATT_ROWS; r++) {
					const vf sj = bcast(s + r * Lp + j);
					for (int u = 0; u < ATT_VECS; u++) acc[r][u] = vfma(sj, vj[u], acc[r][u]);
				}
			}
			for (int r = 0; r < nr; r++)
				for (int u = 0; u < ATT_VECS && c0 + u * VW < hd; u++)
					storep(ctx + (i0 + r) * ldc + c0 + u * VW, acc[r][u], hd - c0 - u * VW);
		}
	}
}

const nn_ops CAT(nn_ops, SUFFIX) = {F(add_layernorm), F(bias_act),      F(softmax),       F(add),
                                    F(scale),         F(sumsq),         F(dot_panels),    F(half_to_float),
                                    F(float_to_half), F(quantize_row),  F(dot_q8),        BF16_OPS,
                                    F(attend),        F(peak_ops)};
