// Scalar reference of the nn row kernels: plain C with libm, double accumulators.
// This is the oracle the SIMD variants are tested against; clarity over speed.
#include <math.h>
#include "nn.h"

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

static void dot_rows_ref(const float *x, const float *w, float *y, int64_t rows, int64_t in,
                         int64_t o0, int64_t o1, int64_t ldy) {
	for (int64_t o = o0; o < o1; o++)
		for (int64_t r = 0; r < rows; r++) {
			double s = 0;
			for (int64_t i = 0; i < in; i++) s += (double)x[r * in + i] * w[o * in + i];
			y[r * ldy + o] = (float)s;
		}
}

const nn_ops nn_ops_ref = {add_layernorm_ref, bias_act_ref, softmax_ref, add_ref, scale_ref, sumsq_ref, dot_rows_ref};
