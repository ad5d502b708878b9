// nn: the elementwise ops and batched GEMMs of a BERT encoder forward pass.
// Every op exists as a scalar reference (the test oracle) and AVX2 / AVX-512 variants;
// `level` picks one (NL_LEVEL_*, platform/cpu/cpu.h). All buffers are
// caller-owned, row-major float32, except Linear's weights: IEEE binary16 (fp16) bits, which
// halve the bytes a few-row (query) GEMM streams, packed in panels (below); every product and
// sum is float32.
// Callers (Go) validate sizes; the only failure left is malloc's (nn_linear).
#ifndef NEEDLE_NN_H
#define NEEDLE_NN_H
#include <stdint.h>

#include "../../../platform/cpu/cpu.h"

enum { NN_ACT_NONE = 0, NN_ACT_GELU = 1 };
// The Linears' number formats (Go: bert.Precision): fp16 weights with fp32 math, int8, bf16.
enum { NN_FP16 = 0, NN_INT8 = 1, NN_BF16 = 2 };
enum { NN_POOL_MEAN = 0, NN_POOL_CLS = 1 };
// Packed weights: w[out,in] (PyTorch's Linear layout) is stored as ceil(out/NN_PANEL) panels
// of NN_PANEL outputs; panel p holds w[p*16 + j][i] at p*in*16 + i*16 + j (zero past out), so
// the weights of 16 adjacent outputs for one input are one contiguous 32-byte load.
enum { NN_PANEL = 16 };
// The few-rows GEMM reads x transposed in blocks of NN_XT_ROWS rows: row b*12 + r, column i
// at xt[(b*in + i)*12 + r] (zero past the last row), so one pointer reaches a column of rows.
enum { NN_XT_ROWS = 12 };

// Pair panels: the weights of the int8 and bf16 Linears (nn_linear_q8, nn_linear_bf16), whose
// instructions multiply pairs of adjacent inputs (vpmaddwd, vpdpwssd, vdpbf16ps), are packed
// in panels of NN_PANEL outputs by pairs of inputs: w[p*16 + j][2g + k] at ((p*G + g)*16 + j)*2 + k,
// G = k/2 for rows of k inputs (in padded: NN_BF16_K, NN_Q8_K), zero past out and in
// (nn_pair_at), so the pair g of 8 (AVX2) or 16 (AVX-512) outputs is one load. Activation rows
// hold k values, zero padded; one pair of a row is broadcast to every lane.
#define NN_BF16_K(in) (((in) + 1) / 2 * 2)
static inline int64_t nn_pair_at(int64_t o, int64_t i, int64_t k) {
	return (o / NN_PANEL) * k * NN_PANEL + (i / 2) * NN_PANEL * 2 + (o % NN_PANEL) * 2 + i % 2;
}

// nn_bf16_round1 rounds f to bfloat16 bits as vcvtneps2bf16 does: ties to even, a denormal
// input as zero (DAZ), NaN quieted.
static inline uint16_t nn_bf16_round1(float f) {
	union { float f; uint32_t u; } v = {f};
	if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(v.u >> 16 | 0x40);
	if ((v.u & 0x7f800000u) == 0) return (uint16_t)(v.u >> 16 & 0x8000);
	return (uint16_t)((v.u + 0x7fffu + (v.u >> 16 & 1)) >> 16);
}

// int8 Linear (nn_linear_q8). Weights: symmetric per output channel and group of NN_Q8_GROUP
// inputs, q = rint(w / s[o, g]) in [-127, 127], in pair panels (k = NN_Q8_K(in): whole groups),
// sign-extended to int16 (vpmovsxbw) when loaded; the scales of panel p, group g are the 16
// floats at s[(p*G + g)*16], G = k / NN_Q8_GROUP. Activations: symmetric per row, int16,
// a = rint(x / s_x) in [-32767, 32767]. vpmaddwd (vpdpwssd with AVX512_VNNI) multiplies int16
// pairs into int32 exactly and a group's sum stays far inside int32, so every group sum equals
// the scalar reference's; the groups are then summed in float32 in order,
// acc = fma((float)sum_g, s[o, g], acc), and y = fma(acc, s_x, b): the same bits at every level.
// Why groups and int16 activations (MiniLM, golden texts, cosine with fp32): per-channel int8
// weights alone cost 0.9965 (min), groups of 32 0.9995, of 64 0.9994, of 128 0.9990; 8-bit
// activations (uint8 with a zero point, for vpdpbusd) cost 0.993-0.994 more on top.
enum { NN_Q8_GROUP = 32 };
#define NN_Q8_K(in) (((in) + NN_Q8_GROUP - 1) / NN_Q8_GROUP * NN_Q8_GROUP)
#define NN_Q8_AMAX 32767

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
	// y[r*out + o] = act(dot(x[r*in:], w[o, :]) + b[o]) for r < rows and the outputs o < out of
	// panels [p0, p1) of the packed fp16 w: the fp16 Linear's GEMM. xt is x in the NN_XT_ROWS
	// layout (the vector kernels read it, the reference reads x). b may be NULL. Each output's
	// bits depend only on its row and w (nn_linear).
	void (*dot_panels)(const float *x, const float *xt, const uint16_t *w, const float *b, float *y, int64_t rows,
	                   int64_t in, int64_t p0, int64_t p1, int64_t out, int act);
	// dst[i] = the exact float value of the binary16 src[i].
	void (*half_to_float)(float *dst, const uint16_t *src, int64_t n);
	// dst[i] = src[i] rounded to binary16, ties to even (|x| >= 65520 -> inf; NaN stays NaN).
	void (*float_to_half)(uint16_t *dst, const float *src, int64_t n);
	// a[0, NN_Q8_K(n)) = x[0, n) quantized to int16 as above (zero padded), *scale = s_x:
	// with M = max|x_i| and m = NN_Q8_AMAX, s_x = M / m and a_i = clamp(rint(x_i * (m / M)),
	// -m, m) at every level (an all-zero row: s_x = 1, a = 0).
	void (*quantize_row)(int16_t *a, const float *x, int64_t n, float *scale);
	// y[r*out + o] = act(fma(acc, xs[r], b[o])), acc summing the groups as above, for r < rows
	// and the outputs of panels [p0, p1) of the packed int8 w with its group scales ws; a rows
	// are k values (k = NN_Q8_K(in)). b may be NULL (0). The same bits at every level.
	void (*dot_q8)(const int16_t *a, const float *xs, const int8_t *w, const float *ws, const float *b,
	               float *y, int64_t rows, int64_t k, int64_t p0, int64_t p1, int64_t out, int act);
	// a[0, NN_BF16_K(n)) = x[0, n) rounded to bfloat16 (ties to even, as vcvtneps2bf16; NaN
	// stays NaN), zero padded. NULL at the levels without a bf16 GEMM.
	void (*round_bf16)(uint16_t *a, const float *x, int64_t n);
	// y[r*out + o] = act(sum_i a[r,i]*w[o,i] + b[o]) over bf16 a rows (k values) and the outputs
	// of panels [p0, p1) of the bf16 pair-packed w: each product is exact in float32, the sums
	// are float32 (their order is the level's). b may be NULL. NULL where round_bf16 is.
	void (*dot_bf16)(const uint16_t *a, const uint16_t *w, const float *b, float *y, int64_t rows,
	                 int64_t k, int64_t p0, int64_t p1, int64_t out, int act);
	// Self-attention of one head of one sequence of L tokens: ctx[i] = softmax(scale * q_i . k_j
	// over j) . v, for q, k, v rows of hd floats at stride ld (the packed qkv) and ctx rows at
	// stride ldc. scratch holds nn_head_scratch(L, hd) floats (K transposed and a score row).
	void (*attend)(const float *q, const float *k, const float *v, int64_t ld, float *ctx, int64_t ldc, int64_t L,
	               int64_t hd, float scale, float *scratch);
	// Runs iters rounds of independent register accumulators of the instruction the Linear of
	// format fmt (NN_FP16 ...) multiplies with, and returns the ops done (2 per multiply-add);
	// 0 where the level has no such Linear. nn_peak times it: the GEMM's ceiling.
	double (*peak_ops)(int fmt, int64_t iters);
} nn_ops;

extern const nn_ops nn_ops_ref, nn_ops_avx2, nn_ops_avx512, nn_ops_avx512vnni, nn_ops_avx512bf16, nn_ops_amx;

// y[rows,out] = act(x[rows,in] * w[out,in]^T + b[out]) with packed fp16 w, on the team: tasks
// of up to NN_LINEAR_ROWS rows by 4 panels (64 outputs), bias and act fused. Batch
// invariance: every output is one FMA chain over its inputs in order, so a row gets the same
// bits alone or in any batch, at every level that has FMA (the reference sums in double),
// whatever BLAS the process loads. Returns 0, -1 when the scratch cannot be allocated, or
// NN_STOPPED when *stop was found set (stop may be NULL: never), checked between tasks: y is
// then partly written, whole tasks in order.
enum { NN_STOPPED = 1 };
enum { NN_LINEAR_ROWS = 192 };
int nn_linear(int level, const float *x, const uint16_t *w, const float *b, float *y,
              int64_t rows, int64_t in, int64_t out, int act, const int32_t *stop);
// dst (ceil(out/16)*16*in halves) = w[out,in] rounded to binary16 and packed in panels;
// returns the index in w of the first value that is not finite in binary16, or -1.
int64_t nn_pack_half(int level, uint16_t *dst, const float *w, int64_t out, int64_t in);
// y[rows,out] = act(x[rows,in] * w^T + b[out]) with w int8-packed by nn_pack_q8 (scales
// ws): each row of x is quantized (quantize_row), then dot_q8 over the team. Returns 0,
// -1 when the quantized rows cannot be allocated, or NN_STOPPED as nn_linear.
int nn_linear_q8(int level, const float *x, const int8_t *w, const float *ws, const float *b, float *y,
                 int64_t rows, int64_t in, int64_t out, int act, const int32_t *stop);
// dst (ceil(out/16)*16*NN_Q8_K(in) bytes) and scale (ceil(out/16)*16*NN_Q8_K(in)/NN_Q8_GROUP
// floats) = w[out,in] quantized per output and group (s = max|w[o, group]| / 127, 1 for an
// all-zero group) in the panels above; returns the index in w of the first value that is not
// finite, or -1.
int64_t nn_pack_q8(int8_t *dst, float *scale, const float *w, int64_t out, int64_t in);
// bf16 Linear: y[rows,out] = act(x[rows,in] * w^T + b[out]) with w pair-packed by nn_pack_bf16:
// each row of x is rounded to bf16 (round_bf16), then dot_bf16 over the team. Returns 0, -1
// when the rounded rows cannot be allocated, -2 when level has no bf16 GEMM (nn_has_bf16), or
// NN_STOPPED as nn_linear.
int nn_linear_bf16(int level, const float *x, const uint16_t *w, const float *b, float *y, int64_t rows,
                   int64_t in, int64_t out, int act, const int32_t *stop);
int nn_has_bf16(int level);
// The multiply rate in ops/s (2 per multiply-add) that the Linear of format fmt cannot exceed
// at level on `threads` team threads: peak_ops timed for about `seconds` of wall time. 0 for
// the reference level or a format the level lacks.
double nn_peak(int level, int fmt, int threads, double seconds);
// dst (ceil(out/16)*16*NN_BF16_K(in) values) = w[out,in] rounded to bf16 in pair panels; returns
// the index in w of the first value that is not finite in bf16 (NaN, inf, or rounding to inf),
// or -1.
int64_t nn_pack_bf16(uint16_t *dst, const float *w, int64_t out, int64_t in);
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
// attend works on NN_ATT_ROWS query rows at a time, keys in blocks of 32 (two AVX-512 vectors),
// head widths up to NN_ATT_MAX_HD. nn_head_keys is L rounded up to whole blocks; nn_head_scratch
// the floats one attend call needs: K transposed (hd rows) and NN_ATT_ROWS rows of scores.
enum { NN_ATT_ROWS = 4, NN_ATT_MAX_HD = 1024 };
static inline int64_t nn_head_keys(int64_t L) { return (L + 31) / 32 * 32; }
static inline int64_t nn_head_scratch(int64_t L, int64_t hd) { return (hd + NN_ATT_ROWS) * nn_head_keys(L); }
// Self-attention of packed sequences: sequence s is tokens [start[s], start[s+1]) (no padding).
// qkv is [T, 3*hidden] (Q | K | V, head h at columns h*head_dim), ctx is [T, hidden].
// scratch holds threads * nn_head_scratch(maxlen, head_dim) floats. Parallel over (sequence,
// head) pairs, each one attend call.
void nn_attention(int level, const float *qkv, float *ctx, const int32_t *start, int32_t nseq,
                  int32_t heads, int32_t head_dim, float *scratch, int64_t scratch_per_thread, int threads);
// dst[s] = mean of x rows in [start[s], start[s+1]) (NN_POOL_MEAN) or its first row (NN_POOL_CLS),
// then L2-normalized if normalize != 0.
void nn_pool(int level, float *dst, const float *x, const int32_t *start, int32_t nseq, int64_t n,
             int mode, int normalize);
// The thread count of the team (GEMMs) and of the OpenMP loops here.
void nn_set_threads(int threads);
int nn_get_threads(void);
#endif
