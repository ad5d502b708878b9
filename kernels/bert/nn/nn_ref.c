// Scalar reference of the nn row kernels: plain C with libm, double accumulators.
// This is the oracle the SIMD variants are tested against; clarity over speed.
#include <math.h>
#include "nn.h"
#include "../../common/half.h"

static void add_layernorm_ref(float *dst, const float *x, const float *bias, const float *res,
                              const float *gamma, const float *beta, int64_t n, float eps) {
	double sum = 0;
	for (int64_t i = 0; i < n; i++) {
		float v = x[i] + (bias ? bias[i] : 0.0f) + (res ? res[i] : 0.0f);
		dst[i] = v;
		sum += v;
	}
	double mean = sum / (double)n, var = 0;
	for (int64_t i = 0; i < n; i++) var += (dst[i] - mean) * (dst[i] - mean);
	double rstd = 1.0 / sqrt(var / (double)n + eps);
	for (int64_t i = 0; i < n; i++) dst[i] = (float)((dst[i] - mean) * rstd) * gamma[i] + beta[i];
}

static float gelu_ref(float x) { return 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2)); }

static void bias_act_ref(float *x, const float *bias, int64_t n, int act) {
	for (int64_t i = 0; i < n; i++) {
		float v = x[i] + (bias ? bias[i] : 0.0f);
		x[i] = act == NN_ACT_GELU ? gelu_ref(v) : v;
	}
}

static void softmax_ref(float *x, int64_t n, int64_t valid, float scale) {
	float m = -INFINITY;
	for (int64_t i = 0; i < valid; i++)
		if (x[i] > m) m = x[i];
	double sum = 0;
	for (int64_t i = 0; i < valid; i++) {
		x[i] = expf(scale * (x[i] - m));
		sum += x[i];
	}
	for (int64_t i = 0; i < valid; i++) x[i] = (float)(x[i] / sum);
	for (int64_t i = valid; i < n; i++) x[i] = 0;
}

static void add_ref(float *acc, const float *x, int64_t n) {
	for (int64_t i = 0; i < n; i++) acc[i] += x[i];
}

static void scale_ref(float *x, int64_t n, float s) {
	for (int64_t i = 0; i < n; i++) x[i] *= s;
}

static float sumsq_ref(const float *x, int64_t n) {
	double s = 0;
	for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
	return (float)s;
}

static void half_to_float_ref(float *dst, const uint16_t *src, int64_t n) {
	for (int64_t i = 0; i < n; i++) dst[i] = nl_half_to_float(src[i]);
}

static void float_to_half_ref(uint16_t *dst, const float *src, int64_t n) {
	for (int64_t i = 0; i < n; i++) dst[i] = nl_float_to_half(src[i]);
}

static void dot_panels_ref(const float *x, const float *xt, const uint16_t *w, const float *b, float *y,
                           int64_t rows, int64_t in, int64_t p0, int64_t p1, int64_t out, int act) {
	(void)xt; // the reference reads x
	for (int64_t o = p0 * NN_PANEL; o < p1 * NN_PANEL && o < out; o++)
		for (int64_t r = 0; r < rows; r++) {
			const uint16_t *wo = w + (o / NN_PANEL) * in * NN_PANEL + o % NN_PANEL;
			double s = 0;
			for (int64_t i = 0; i < in; i++) s += (double)x[r * in + i] * nl_half_to_float(wo[i * NN_PANEL]);
			y[r * out + o] = (float)s;
			bias_act_ref(y + r * out + o, b ? b + o : NULL, 1, act);
		}
}

static void quantize_row_ref(int16_t *a, const float *x, int64_t n, float *scale) {
	float M = 0;
	for (int64_t i = 0; i < n; i++) M = fabsf(x[i]) > M ? fabsf(x[i]) : M;
	const int32_t m = NN_Q8_AMAX;
	*scale = M > 0 ? M / (float)m : 1;
	const float inv = M > 0 ? (float)m / M : 0;
	for (int64_t i = 0; i < NN_Q8_K(n); i++) {
		float v = i < n ? rintf(x[i] * inv) : 0;
		a[i] = (int16_t)(v < -m ? -m : v > m ? m : v);
	}
}

static void dot_q8_ref(const int16_t *a, const float *xs, const int8_t *w, const float *ws, const float *b,
                       float *y, int64_t rows, int64_t k, int64_t p0, int64_t p1, int64_t out, int act) {
	const int64_t groups = k / NN_Q8_GROUP;
	for (int64_t o = p0 * NN_PANEL; o < p1 * NN_PANEL && o < out; o++)
		for (int64_t r = 0; r < rows; r++) {
			float acc = 0;
			for (int64_t g = 0; g < groups; g++) {
				int32_t s = 0;
				for (int64_t i = g * NN_Q8_GROUP; i < (g + 1) * NN_Q8_GROUP; i++)
					s += (int32_t)a[r * k + i] * w[nn_pair_at(o, i, k)];
				acc = fmaf((float)s, ws[((o / NN_PANEL) * groups + g) * NN_PANEL + o % NN_PANEL], acc);
			}
			float v = fmaf(acc, xs[r], b ? b[o] : 0.0f);
			y[r * out + o] = act == NN_ACT_GELU ? gelu_ref(v) : v;
		}
}

static void round_bf16_ref(uint16_t *a, const float *x, int64_t n) {
	for (int64_t i = 0; i < NN_BF16_K(n); i++) a[i] = i < n ? nn_bf16_round1(x[i]) : 0;
}

static void dot_bf16_ref(const uint16_t *a, const uint16_t *w, const float *b, float *y, int64_t rows, int64_t k,
                         int64_t p0, int64_t p1, int64_t out, int act) {
	for (int64_t o = p0 * NN_PANEL; o < p1 * NN_PANEL && o < out; o++)
		for (int64_t r = 0; r < rows; r++) {
			double s = 0;
			for (int64_t i = 0; i < k; i++)
				s += (double)nl_bf16_to_float(a[r * k + i]) * nl_bf16_to_float(w[nn_pair_at(o, i, k)]);
			float v = (float)s + (b ? b[o] : 0.0f);
			y[r * out + o] = act == NN_ACT_GELU ? gelu_ref(v) : v;
		}
}

static void attend_ref(const float *q, const float *k, const float *v, int64_t ld, float *ctx, int64_t ldc, int64_t L,
                       int64_t hd, float scale, float *scratch) {
	float *s = scratch; // one row of scores
	for (int64_t i = 0; i < L; i++) {
		for (int64_t j = 0; j < L; j++) {
			double d = 0;
			for (int64_t c = 0; c < hd; c++) d += (double)q[i * ld + c] * k[j * ld + c];
			s[j] = (float)d;
		}
		softmax_ref(s, L, L, scale);
		for (int64_t c = 0; c < hd; c++) {
			double d = 0;
			for (int64_t j = 0; j < L; j++) d += (double)s[j] * v[j * ld + c];
			ctx[i * ldc + c] = (float)d;
		}
	}
}

// The reference has no peak worth measuring: clarity, not speed.
static double peak_ops_ref(int fmt, int64_t iters) { return (void)fmt, (void)iters, 0; }

const nn_ops nn_ops_ref = {add_layernorm_ref, bias_act_ref, softmax_ref,    add_ref,
                           scale_ref,         sumsq_ref,    dot_panels_ref, half_to_float_ref,
                           float_to_half_ref, quantize_row_ref, dot_q8_ref, round_bf16_ref,
                           dot_bf16_ref, attend_ref, peak_ops_ref};
