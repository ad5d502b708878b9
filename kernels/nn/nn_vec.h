// SIMD row kernels written once with GCC vector extensions, included by nn_avx2.c and
// nn_avx512.c under a target pragma with VW (float lanes) and SUFFIX defined. exp and erf
// are polynomial approximations (erf: Abramowitz-Stegun 7.1.26, |error| < 1.5e-7); tails
// run through the same vector code on a padded copy, so every element takes one path.
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

// dot_rows keeps one weight row in L1 while every input row is dotted with it; four
// accumulators hide the FMA latency.
static void F(dot_rows)(const float *x, const float *w, float *y, int64_t rows, int64_t in,
                        int64_t o0, int64_t o1, int64_t ldy) {
	const int64_t in4 = in - in % (4 * VW);
	for (int64_t o = o0; o < o1; o++) {
		const float *wr = w + o * in;
		for (int64_t r = 0; r < rows; r++) {
			const float *xr = x + r * in;
			vf a0 = splat(0), a1 = splat(0), a2 = splat(0), a3 = splat(0);
			int64_t i = 0;
			for (; i < in4; i += 4 * VW) {
				a0 += load(xr + i) * load(wr + i);
				a1 += load(xr + i + VW) * load(wr + i + VW);
				a2 += load(xr + i + 2 * VW) * load(wr + i + 2 * VW);
				a3 += load(xr + i + 3 * VW) * load(wr + i + 3 * VW);
			}
			for (; i < in; i += VW) a0 += loadp(xr + i, in - i, 0) * loadp(wr + i, in - i, 0);
			y[r * ldy + o] = hsum((a0 + a1) + (a2 + a3));
		}
	}
}

const nn_ops CAT(nn_ops, SUFFIX) = {F(add_layernorm), F(bias_act), F(softmax), F(add), F(scale), F(sumsq), F(dot_rows)};
