// Drivers of the nn ops: pick the row kernels of a level, loop rows (OpenMP when the work is
// big enough to pay for waking threads), and run the GEMMs: a few rows on dot_panels over the
// team of team.c, more rows through OpenBLAS.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include <cblas.h>
#include "nn.h"
#include "team.h"

// nn_threads is the team size of the parallel loops here, set with nn_set_threads; until
// then (0) it follows OpenBLAS's own default (OPENBLAS_NUM_THREADS or all cores).
static int nn_threads = 0;

// Linear with at most this many rows skips sgemm for dot_panels: for few rows OpenBLAS spends
// most of its time packing the weight matrix, and the fp32 copy sgemm needs costs more than the
// GEMM. Measured on AVX-512 (2 threads, MiniLM and e5 shapes): dot_panels ahead up to about
// 128 rows, level at 256, behind from 512 (sgemm: 176 GFLOP/s on the e5 shape, copy included).
#ifndef SMALL_ROWS
#define SMALL_ROWS 128
#endif

// Row-wise ops over at most this many rows (a query's tokens) run on the calling thread: they
// take microseconds, an OpenMP fork's wake-up about as long.
#define FEW_ROWS 32

// Rows x n below this many floats run on the calling thread only.
#define PAR_MIN (1 << 14)

// parallel reports whether a row-wise op over rows x n forks an OpenMP team.
static int parallel(int64_t rows, int64_t n) { return rows > FEW_ROWS && rows * n >= PAR_MIN; }

static const nn_ops *pick(int level) {
	switch (level) {
	case NL_LEVEL_AVX512: return &nn_ops_avx512;
	case NL_LEVEL_AVX2: return &nn_ops_avx2;
	}
	return &nn_ops_ref;
}

void nn_set_threads(int threads) {
	if (threads < 1) threads = 1;
	nn_threads = threads;
	openblas_set_num_threads(threads);
}

int nn_get_threads(void) { return nn_threads > 0 ? nn_threads : openblas_get_num_threads(); }

// sync_threads applies nn_threads to the calling OS thread. libgomp keeps the thread count
// per OS thread, and OpenMP OpenBLAS resets its own count to the caller's omp_get_max_threads()
// on every call, so a cgo call landing on a fresh Go thread would otherwise use all cores.
static void sync_threads(void) {
	if (nn_threads > 0 && omp_get_max_threads() != nn_threads) omp_set_num_threads(nn_threads);
}

// dot_task is one team task of the few-row Linear: DOT_TASK panels (64 outputs).
#define DOT_TASK 4
typedef struct {
	const nn_ops *ops;
	const float *x, *xt;
	const uint16_t *w;
	float *y;
	int64_t rows, in, out, panels;
} dot_job;

static void dot_task(void *arg, int64_t t) {
	const dot_job *j = arg;
	const int64_t p0 = t * DOT_TASK, p1 = p0 + DOT_TASK < j->panels ? p0 + DOT_TASK : j->panels;
	j->ops->dot_panels(j->x, j->xt, j->w, j->y, j->rows, j->in, p0, p1, j->out);
}

// xt_len is the floats of x[rows,in] in the NN_XT_ROWS block layout of nn.h.
static int64_t xt_len(int64_t rows, int64_t in) { return (rows + NN_XT_ROWS - 1) / NN_XT_ROWS * NN_XT_ROWS * in; }

// transpose_x writes x[rows,in] into xt in the NN_XT_ROWS block layout.
static void transpose_x(float *xt, const float *x, int64_t rows, int64_t in) {
	memset(xt, 0, (size_t)xt_len(rows, in) * sizeof(float));
	for (int64_t r = 0; r < rows; r++)
		for (int64_t i = 0; i < in; i++) xt[((r / NN_XT_ROWS) * in + i) * NN_XT_ROWS + r % NN_XT_ROWS] = x[r * in + i];
}

static int64_t panels(int64_t out) { return (out + NN_PANEL - 1) / NN_PANEL; }

// With a stop flag, a Linear of more than SMALL_ROWS rows runs sgemm on STOP_ROWS rows at a
// time and checks the flag in between (the few-row path checks it between team tasks), so a
// batch whose clients all left (engine/bert) gets out of a GEMM within one chunk. The chunks
// give one sgemm's bits (nn_test.go checks it): OpenBLAS sums each row in the same order for
// any row count, except on the kernels it takes for small products (measured with 0.3.21 on
// AVX2: tails of up to ~1M multiply-adds came out in other bits; AVX-512 builds also have
// sgemm_direct for products below 7.3M), so no chunk is smaller than STOP_ROWS (a short tail
// joins the last chunk) and a Linear chunks only when STOP_ROWS rows are over STOP_MIN_MACS
// multiply-adds (the BERT shapes: 19M to 75M).
#define STOP_ROWS 128
#define STOP_MIN_MACS (8 << 20)

int nn_linear(int level, const float *x, const uint16_t *w, const float *b, float *y,
              int64_t rows, int64_t in, int64_t out, int act, const int32_t *stop) {
	if (rows == 0 || out == 0) return 0;
	if (team_stopped(stop)) return NN_STOPPED;
	sync_threads();
	const nn_ops *ops = pick(level);
	const int64_t np = panels(out);
	if (rows <= SMALL_ROWS) {
		float *xt = malloc((size_t)(in > 0 ? xt_len(rows, in) : 1) * sizeof(float));
		if (!xt) return -1;
		transpose_x(xt, x, rows, in);
		dot_job j = {ops, x, xt, w, y, rows, in, out, np};
		team_run_stoppable((np + DOT_TASK - 1) / DOT_TASK, dot_task, &j, nn_get_threads(), stop);
		free(xt);
	} else {
		// sgemm reads float32: w^T[in,out] unpacked from the panels lives for the call.
		float *wt = malloc((size_t)(in > 0 ? out * in : 1) * sizeof(float));
		if (!wt) return -1;
#pragma omp parallel for num_threads(nn_get_threads()) if (out * in >= PAR_MIN)
		for (int64_t p = 0; p < np; p++) {
			const int64_t n = out - p * NN_PANEL < NN_PANEL ? out - p * NN_PANEL : NN_PANEL;
			float f[NN_PANEL];
			for (int64_t i = 0; i < in; i++) {
				ops->half_to_float(f, w + (p * in + i) * NN_PANEL, NN_PANEL);
				memcpy(wt + i * out + p * NN_PANEL, f, (size_t)n * sizeof(float));
			}
		}
		const int64_t chunk = stop && STOP_ROWS * in * out > STOP_MIN_MACS ? STOP_ROWS : rows;
		for (int64_t r = 0, n; r < rows && !team_stopped(stop); r += n) {
			n = rows - r < 2 * chunk ? rows - r : chunk;
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)n, (blasint)out, (blasint)in, 1.0f,
			            x + r * in, (blasint)in, wt, (blasint)out, 0.0f, y + r * out, (blasint)out);
		}
		free(wt);
	}
	if (team_stopped(stop)) return NN_STOPPED;
	nn_bias_act(level, y, b, rows, out, act);
	return 0;
}

// The int8 Linear runs on the team for any row count (no BLAS has its layout). A task is
// Q8_TASK_ROWS rows by Q8_TASK panels: the rows' activations stay in L2 while each panel's
// weights (16 x in bytes) serve them from L1.
#define Q8_TASK_ROWS 96
#define Q8_TASK 4
typedef struct {
	const nn_ops *ops;
	const float *x, *b, *ws;
	const int8_t *w;
	int16_t *a;
	float *xs, *y;
	int64_t rows, in, k, out, panels;
	int act;
} q8_job;

static void q8_quantize_task(void *arg, int64_t t) {
	const q8_job *j = arg;
	for (int64_t r = t * Q8_TASK_ROWS; r < j->rows && r < (t + 1) * Q8_TASK_ROWS; r++)
		j->ops->quantize_row(j->a + r * j->k, j->x + r * j->in, j->in, j->xs + r);
}

static void q8_dot_task(void *arg, int64_t t) {
	const q8_job *j = arg;
	const int64_t groups = (j->panels + Q8_TASK - 1) / Q8_TASK, r0 = t / groups * Q8_TASK_ROWS;
	const int64_t p0 = t % groups * Q8_TASK, p1 = p0 + Q8_TASK < j->panels ? p0 + Q8_TASK : j->panels;
	const int64_t rows = j->rows - r0 < Q8_TASK_ROWS ? j->rows - r0 : Q8_TASK_ROWS;
	j->ops->dot_q8(j->a + r0 * j->k, j->xs + r0, j->w, j->ws, j->b, j->y + r0 * j->out, rows, j->k, p0, p1,
	               j->out, j->act);
}

int nn_linear_q8(int level, const float *x, const int8_t *w, const float *ws, const float *b, float *y,
                 int64_t rows, int64_t in, int64_t out, int act) {
	if (rows == 0 || out == 0) return 0;
	const int64_t k = NN_Q8_K(in), chunks = (rows + Q8_TASK_ROWS - 1) / Q8_TASK_ROWS;
	int16_t *a = malloc((size_t)(rows * k + 1) * sizeof(int16_t));
	float *xs = malloc((size_t)rows * sizeof(float));
	if (!a || !xs) {
		free(a), free(xs);
		return -1;
	}
	q8_job j = {pick(level), x, b, ws, w, a, xs, y, rows, in, k, out, panels(out), act};
	team_run(chunks, q8_quantize_task, &j, nn_get_threads());
	team_run(chunks * ((j.panels + Q8_TASK - 1) / Q8_TASK), q8_dot_task, &j, nn_get_threads());
	free(a), free(xs);
	return 0;
}

int64_t nn_pack_q8(int8_t *dst, float *scale, const float *w, int64_t out, int64_t in) {
	for (int64_t i = 0; i < out * in; i++)
		if (!isfinite(w[i])) return i;
	const int64_t k = NN_Q8_K(in);
	memset(dst, 0, (size_t)(panels(out) * NN_PANEL * k));
#pragma omp parallel for num_threads(nn_get_threads()) if (out * in >= PAR_MIN)
	for (int64_t o = 0; o < out; o++) {
		const float *wo = w + o * in;
		float m = 0;
		for (int64_t i = 0; i < in; i++) m = fabsf(wo[i]) > m ? fabsf(wo[i]) : m;
		scale[o] = m > 0 ? m / 127 : 1;
		int8_t *d = dst + (o / NN_PANEL) * k * NN_PANEL + (o % NN_PANEL) * 2;
		for (int64_t i = 0; i < in; i++) {
			float q = rintf(wo[i] / scale[o]);
			d[(i / 2) * NN_PANEL * 2 + i % 2] = (int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
		}
	}
	return -1;
}

int64_t nn_pack_half(int level, uint16_t *dst, const float *w, int64_t out, int64_t in) {
	const nn_ops *ops = pick(level);
	const int64_t np = panels(out);
#pragma omp parallel for num_threads(nn_get_threads()) if (out * in >= PAR_MIN)
	for (int64_t p = 0; p < np; p++) {
		const int64_t n = out - p * NN_PANEL < NN_PANEL ? out - p * NN_PANEL : NN_PANEL;
		for (int64_t i = 0; i < in; i++) {
			float f[NN_PANEL] = {0};
			for (int64_t j = 0; j < n; j++) f[j] = w[(p * NN_PANEL + j) * in + i];
			ops->float_to_half(dst + (p * in + i) * NN_PANEL, f, NN_PANEL);
		}
	}
	for (int64_t o = 0; o < out; o++) // report in w's order
		for (int64_t i = 0; i < in; i++)
			if ((dst[((o / NN_PANEL) * in + i) * NN_PANEL + o % NN_PANEL] & 0x7c00) == 0x7c00) return o * in + i;
	return -1;
}

void nn_add_layernorm(int level, float *dst, const float *x, const float *bias, const float *res,
                      const float *gamma, const float *beta, int64_t rows, int64_t n, float eps) {
	const nn_ops *ops = pick(level);
#pragma omp parallel for num_threads(nn_get_threads()) if (parallel(rows, n))
	for (int64_t r = 0; r < rows; r++)
		ops->add_layernorm(dst + r * n, x + r * n, bias, res ? res + r * n : 0, gamma, beta, n, eps);
}

void nn_bias_act(int level, float *x, const float *bias, int64_t rows, int64_t n, int act) {
	const nn_ops *ops = pick(level);
	if (!bias && act == NN_ACT_NONE) return;
#pragma omp parallel for num_threads(nn_get_threads()) if (parallel(rows, n))
	for (int64_t r = 0; r < rows; r++) ops->bias_act(x + r * n, bias, n, act);
}

void nn_softmax(int level, float *x, int64_t rows, int64_t n, int64_t valid, float scale) {
	const nn_ops *ops = pick(level);
#pragma omp parallel for num_threads(nn_get_threads()) if (parallel(rows, n))
	for (int64_t r = 0; r < rows; r++) ops->softmax(x + r * n, n, valid, scale);
}

// normalize scales x to unit L2 norm like torch.nn.functional.normalize (eps 1e-12).
static void normalize(const nn_ops *ops, float *x, int64_t n) {
	float norm = sqrtf(ops->sumsq(x, n));
	ops->scale(x, n, 1.0f / (norm > 1e-12f ? norm : 1e-12f));
}

void nn_l2_normalize(int level, float *x, int64_t rows, int64_t n) {
	const nn_ops *ops = pick(level);
	for (int64_t r = 0; r < rows; r++) normalize(ops, x + r * n, n);
}

void nn_embed_layernorm(int level, float *dst, const int32_t *ids, const int32_t *pos_ids, int64_t ntok,
                        const float *word, const float *pos, const float *type0,
                        const float *gamma, const float *beta, int64_t n, float eps) {
	const nn_ops *ops = pick(level);
#pragma omp parallel for num_threads(nn_get_threads()) if (parallel(ntok, n))
	for (int64_t t = 0; t < ntok; t++)
		ops->add_layernorm(dst + t * n, word + (int64_t)ids[t] * n, type0, pos + (int64_t)pos_ids[t] * n,
		                   gamma, beta, n, eps);
}

void nn_attention(int level, const float *qkv, float *ctx, const int32_t *start, int32_t nseq,
                  int32_t heads, int32_t head_dim, float *scratch, int64_t scratch_per_thread, int threads) {
	const nn_ops *ops = pick(level);
	const int64_t hidden = (int64_t)heads * head_dim, ld = 3 * hidden;
	const float scale = 1.0f / sqrtf((float)head_dim);
	const int64_t jobs = (int64_t)nseq * heads;
	// Inside the parallel region OpenBLAS sees omp_in_parallel() and runs each GEMM on one
	// thread. A query's few tokens stay on the calling thread (their GEMMs are tiny).
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (parallel(start[nseq], hidden))
	for (int64_t j = 0; j < jobs; j++) {
		const int64_t s = j / heads, h = j % heads;
		const int64_t L = start[s + 1] - start[s];
		if (L == 0) continue;
		float *S = scratch + (int64_t)omp_get_thread_num() * scratch_per_thread;
		const float *q = qkv + start[s] * ld + h * head_dim;
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)L, (blasint)L, head_dim,
		            1.0f, q, (blasint)ld, q + hidden, (blasint)ld, 0.0f, S, (blasint)L);
		for (int64_t r = 0; r < L; r++) ops->softmax(S + r * L, L, L, scale);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)L, head_dim, (blasint)L,
		            1.0f, S, (blasint)L, q + 2 * hidden, (blasint)ld, 0.0f,
		            ctx + start[s] * hidden + h * head_dim, (blasint)hidden);
	}
}

void nn_pool(int level, float *dst, const float *x, const int32_t *start, int32_t nseq, int64_t n,
             int mode, int normalize_out) {
	const nn_ops *ops = pick(level);
	for (int32_t s = 0; s < nseq; s++) {
		float *d = dst + (int64_t)s * n;
		const int64_t L = start[s + 1] - start[s];
		memset(d, 0, (size_t)n * 4);
		if (L == 0) continue;
		if (mode == NN_POOL_CLS) {
			ops->add(d, x + (int64_t)start[s] * n, n);
		} else {
			for (int64_t t = start[s]; t < start[s + 1]; t++) ops->add(d, x + t * n, n);
			ops->scale(d, n, 1.0f / (float)L);
		}
		if (normalize_out) normalize(ops, d, n);
	}
}
