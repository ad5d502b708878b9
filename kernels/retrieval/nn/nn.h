// nn: the elementwise ops and batched GEMMs of a BERT encoder forward pass.
// Every op exists as a scalar reference (the test oracle) and AVX2 / AVX-512 variants;
// `level` picks one (NL_LEVEL_*, kernels/platform/cpu/cpu.h). All buffers are
// caller-owned, row-major float32, except Linear's weights: IEEE binary16 (fp16) bits, which
// halve the bytes a few-row (query) GEMM streams, packed in panels (below); every product and
// sum is float32.
// Callers (Go) validate sizes; the only failure left is malloc's (nn_linear).
#ifndef NEEDLE_NN_H
#define NEEDLE_NN_H
#include <stdint.h>

#include "../../platform/cpu/cpu.h"

enum { NN_ACT_NONE = 0, NN_ACT_GELU = 1 };
enum { NN_POOL_MEAN = 0, NN_POOL_CLS = 1 };
// Packed weights: w[out,in] (PyTorch's Linear layout) is stored as ceil(out/NN_PANEL) panels
// of NN_PANEL outputs; panel p holds w[p*16 + j][i] at p*in*16 + i*16 + j (zero past out), so
// the weights of 16 adjacent outputs for one input are one contiguous 32-byte load.
enum { NN_PANEL = 16 };
// The few-rows GEMM reads x transposed in blocks of NN_XT_ROWS rows: row b*12 + r, column i
// at xt[(b*in + i)*12 + r] (zero past the last row), so one pointer reaches a column of rows.
enum { NN_XT_ROWS = 12 };

// int8 Linear (nn_linear_q8). Weights: symmetric per output channel, q = rint(w / s_w[o]) in
// [-127, 127], packed in panels of NN_PANEL outputs by pairs of inputs: w[p*16 + j][2g + k] at
// ((p*G + g)*16 + j)*2 + k, G = ceil(in/2), zero past out and in, so the pair g of 8 (AVX2)
// or 16 (AVX-512) outputs is one 16- or 32-byte load, sign-extended to int16 (vpmovsxbw).
// Activations: symmetric per row, int16: a = rint(x / s_x) in [-m, m], m = nn_q8_amax(in),
// rows NN_Q8_K(in) values, zero padded. vpmaddwd multiplies int16 pairs into int32 exactly,
// and m keeps every sum of in products inside int32, so the sums equal the scalar
// reference's at every level. Why int16 activations: on MiniLM, 8-bit activations (uint8 for
// vpmaddubsw, whose int16 pair sums also forced 7-bit weights) left golden cosines down to
// 0.990; int16 activations leave only the weights' rounding (0.996).
#define NN_Q8_K(in) (((in) + 1) / 2 * 2)
static inline int32_t nn_q8_amax(int64_t in) {
	const int64_t m = 2147483647 / ((in > 0 ? NN_Q8_K(in) : 1) * 127);
	return m < 32767 ? (int32_t)m : 32767;
}

// Per-level row kernels. n is the row length in floats.
typedef struct {
	// dst = LayerNorm(x + bias + res) * gamma + beta; bias and res may be NULL; dst may alias x or res.
	void (*add_layernorm)(float *dst, const float *x, const float *bias, const float *res,
	                      const float *gamma, const float *beta, int64_t n, float eps);
	// x = act(x + bias); act is NN_ACT_*; bias may be NULL.
	void (*bias_act)(float *x, const float *bias, int64_t n, int act);
	// x[:valid] = softmax(scale * x[:valid]); x[valid:n] = 0.
	void (*softmax)(float *x, int64_t n, int64_t valid, float scale);
	// acc += x
	void (*add)(float *acc, const float *x, int64_t n);
	// x *= s
	void (*scale)(float *x, int64_t n, float s);
	// sum of x[i]^2, accumulated in at least float32 lanes
	float (*sumsq)(const float *x, int64_t n);
	// y[r*out + o] = dot(x[r*in:], w[o, :]) for r < rows and the outputs o < out of panels
	// [p0, p1) of the packed fp16 w: the few-rows GEMM, which reads each weight once. xt is
	// x in the NN_XT_ROWS layout (the vector kernels read it, the reference reads x).
	void (*dot_panels)(const float *x, const float *xt, const uint16_t *w, float *y, int64_t rows,
	                   int64_t in, int64_t p0, int64_t p1, int64_t out);
	// dst[i] = the exact float value of the binary16 src[i].
	void (*half_to_float)(float *dst, const uint16_t *src, int64_t n);
	// dst[i] = src[i] rounded to binary16, ties to even (|x| >= 65520 -> inf; NaN stays NaN).
	void (*float_to_half)(uint16_t *dst, const float *src, int64_t n);
	// a[0, NN_Q8_K(n)) = x[0, n) quantized to int16 as above (zero padded), *scale = s_x:
	// with M = max|x_i| and m = nn_q8_amax(n), s_x = M / m and a_i = clamp(rint(x_i * (m / M)),
	// -m, m) at every level (an all-zero row: s_x = 1, a = 0).
	void (*quantize_row)(int16_t *a, const float *x, int64_t n, float *scale);
	// y[r*out + o] = act(fma((float)(sum_i a[r,i]*q[o,i]), xs[r]*ws[o], b[o])) for r < rows and
	// the outputs of panels [p0, p1) of the packed int8 w; a rows are k values (k =
	// NN_Q8_K(in)). b may be NULL (0). The int32 sums are exact at every level.
	void (*dot_q8)(const int16_t *a, const float *xs, const int8_t *w, const float *ws, const float *b,
	               float *y, int64_t rows, int64_t k, int64_t p0, int64_t p1, int64_t out, int act);
} nn_ops;

extern const nn_ops nn_ops_ref, nn_ops_avx2, nn_ops_avx512;

// y[rows,out] = act(x[rows,in] * w[out,in]^T + b[out]) with packed fp16 w: dot_panels for a
// few rows, else one cblas_sgemm on a float32 copy of w made for the call; then one fused
// bias/act pass. Returns 0, -1 when the float32 copy cannot be allocated, or NN_STOPPED when
// *stop was found set (stop may be NULL: never; see nn.c): y is then partly written.
enum { NN_STOPPED = 1 };
int nn_linear(int level, const float *x, const uint16_t *w, const float *b, float *y,
              int64_t rows, int64_t in, int64_t out, int act, const int32_t *stop);
// dst (ceil(out/16)*16*in halves) = w[out,in] rounded to binary16 and packed in panels;
// returns the index in w of the first value that is not finite in binary16, or -1.
int64_t nn_pack_half(int level, uint16_t *dst, const float *w, int64_t out, int64_t in);
// y[rows,out] = act(x[rows,in] * w^T + b[out]) with w int8-packed by nn_pack_q8 (scales
// ws): each row of x is quantized (quantize_row), then dot_q8 over the team. Returns 0,
// or -1 when the quantized rows cannot be allocated.
int nn_linear_q8(int level, const float *x, const int8_t *w, const float *ws, const float *b, float *y,
                 int64_t rows, int64_t in, int64_t out, int act);
// dst (ceil(out/16)*16*NN_Q8_K(in) bytes) and scale[out] = w[out,in] quantized per output
// channel (s = max|w[o,:]| / 127, 1 for an all-zero row) in the panels above; returns the
// index in w of the first value that is not finite, or -1.
int64_t nn_pack_q8(int8_t *dst, float *scale, const float *w, int64_t out, int64_t in);
// Row-wise ops over rows x n.
void nn_add_layernorm(int level, float *dst, const float *x, const float *bias, const float *res,
                      const float *gamma, const float *beta, int64_t rows, int64_t n, float eps);
void nn_bias_act(int level, float *x, const float *bias, int64_t rows, int64_t n, int act);
void nn_softmax(int level, float *x, int64_t rows, int64_t n, int64_t valid, float scale);
void nn_l2_normalize(int level, float *x, int64_t rows, int64_t n);
// dst[t] = LayerNorm(word[ids[t]] + pos[pos_ids[t]] + type0) for ntok tokens of width n.
void nn_embed_layernorm(int level, float *dst, const int32_t *ids, const int32_t *pos_ids, int64_t ntok,
                        const float *word, const float *pos, const float *type0,
                        const float *gamma, const float *beta, int64_t n, float eps);
// Self-attention of packed sequences: sequence s is tokens [start[s], start[s+1]) (no padding).
// qkv is [T, 3*hidden] (Q | K | V, head h at columns h*head_dim), ctx is [T, hidden].
// scratch holds threads * maxlen * maxlen floats. Parallel over (sequence, head) pairs.
void nn_attention(int level, const float *qkv, float *ctx, const int32_t *start, int32_t nseq,
                  int32_t heads, int32_t head_dim, float *scratch, int64_t scratch_per_thread, int threads);
// dst[s] = mean of x rows in [start[s], start[s+1]) (NN_POOL_MEAN) or its first row (NN_POOL_CLS),
// then L2-normalized if normalize != 0.
void nn_pool(int level, float *dst, const float *x, const int32_t *start, int32_t nseq, int64_t n,
             int mode, int normalize);
// OpenBLAS + OpenMP thread count for GEMMs and the parallel loops here.
void nn_set_threads(int threads);
int nn_get_threads(void);
#endif
