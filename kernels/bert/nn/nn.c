// Drivers of the nn ops: pick the row kernels of a level, loop rows (OpenMP when the work is
// big enough to pay for waking threads), and run the GEMMs over the team of team.c. No BLAS:
// a BLAS's blocking changes a row's bits with the batch around it, and its speed with the
// kernels it picks for the CPU (OPENBLAS_CORETYPE).
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>
#include "nn.h"
#include "team.h"

// nn_threads is the team size of the GEMMs and parallel loops here, set with nn_set_threads;
// until then (0) it is OpenMP's default (OMP_NUM_THREADS or all cores).
static int nn_threads = 0;

// Row-wise ops over at most this many rows (a query's tokens) run on the calling thread: they
// take microseconds, an OpenMP fork's wake-up about as long.
#define FEW_ROWS 32

// Rows x n below this many floats run on the calling thread only.
#define PAR_MIN (1 << 14)

// parallel reports whether a row-wise op over rows x n forks an OpenMP team.
static int parallel(int64_t rows, int64_t n) { return rows > FEW_ROWS && rows * n >= PAR_MIN; }

static const nn_ops *pick(int level) {
	switch (level) {
	case NL_LEVEL_AMX: return &nn_ops_amx;
	case NL_LEVEL_AVX512BF16: return &nn_ops_avx512bf16;
	case NL_LEVEL_AVX512VNNI: return &nn_ops_avx512vnni;
	case NL_LEVEL_AVX512: return &nn_ops_avx512;
	case NL_LEVEL_AVX2: return &nn_ops_avx2;
	}
	return &nn_ops_ref;
}

void nn_set_threads(int threads) { nn_threads = threads < 1 ? 1 : threads; }

int nn_get_threads(void) { return nn_threads > 0 ? nn_threads : omp_get_num_procs(); }

// sync_threads applies nn_threads to the calling OS thread. libgomp keeps the thread count
// per OS thread, so a cgo call landing on a fresh Go thread would otherwise use all cores.
static void sync_threads(void) {
	if (nn_threads > 0 && omp_get_max_threads() != nn_threads) omp_set_num_threads(nn_threads);
}

// The fp16 Linear's team tasks (nn.h): first prep tasks, each one NN_XT_ROWS block of x
// transposed into xt; then dot tasks of up to NN_LINEAR_ROWS rows by DOT_TASK panels (64
// outputs), in row-major order, so that a stop leaves whole tasks done in order. A task's rows
// (xt: 192 x in floats) stay in L2 while each block's weights serve them from L1.
#define DOT_TASK 4
typedef struct {
	const nn_ops *ops;
	const float *x, *b;
	const uint16_t *w;
	float *xt, *y;
	int64_t rows, in, out, panels;
	int act;
} dot_job;

// xt_len is the floats of x[rows,in] in the NN_XT_ROWS block layout of nn.h.
static int64_t xt_len(int64_t rows, int64_t in) { return (rows + NN_XT_ROWS - 1) / NN_XT_ROWS * NN_XT_ROWS * in; }

static int64_t panels(int64_t out) { return (out + NN_PANEL - 1) / NN_PANEL; }

// prep_task transposes block t of x: rows [t*12, t*12 + 12), zero past the last row.
static void prep_task(void *arg, int64_t t) {
	const dot_job *j = arg;
	float *xb = j->xt + t * j->in * NN_XT_ROWS;
	const int64_t r0 = t * NN_XT_ROWS, nr = j->rows - r0 < NN_XT_ROWS ? j->rows - r0 : NN_XT_ROWS;
	if (nr < NN_XT_ROWS) memset(xb, 0, (size_t)(j->in * NN_XT_ROWS) * sizeof(float));
	for (int64_t r = 0; r < nr; r++)
		for (int64_t i = 0; i < j->in; i++) xb[i * NN_XT_ROWS + r] = j->x[(r0 + r) * j->in + i];
}

static void dot_task(void *arg, int64_t t) {
	const dot_job *j = arg;
	const int64_t groups = (j->panels + DOT_TASK - 1) / DOT_TASK, r0 = t / groups * NN_LINEAR_ROWS;
	const int64_t p0 = t % groups * DOT_TASK, p1 = p0 + DOT_TASK < j->panels ? p0 + DOT_TASK : j->panels;
	const int64_t rows = j->rows - r0 < NN_LINEAR_ROWS ? j->rows - r0 : NN_LINEAR_ROWS;
	j->ops->dot_panels(j->x + r0 * j->in, j->xt + r0 * j->in, j->w, j->b, j->y + r0 * j->out, rows, j->in, p0, p1,
	                   j->out, j->act);
}

int nn_linear(int level, const float *x, const uint16_t *w, const float *b, float *y,
              int64_t rows, int64_t in, int64_t out, int act, const int32_t *stop) {
	if (rows == 0 || out == 0) return 0;
	if (team_stopped(stop)) return NN_STOPPED;
	dot_job j = {pick(level), x, b, w, NULL, y, rows, in, out, panels(out), act};
	j.xt = malloc((size_t)(in > 0 ? xt_len(rows, in) : 1) * sizeof(float));
	if (!j.xt) return -1;
	const int threads = nn_get_threads();
	team_run((rows + NN_XT_ROWS - 1) / NN_XT_ROWS, prep_task, &j, threads);
	const int64_t groups = (j.panels + DOT_TASK - 1) / DOT_TASK;
	team_run_stoppable((rows + NN_LINEAR_ROWS - 1) / NN_LINEAR_ROWS * groups, dot_task, &j, threads, stop);
	free(j.xt);
	return team_stopped(stop) ? NN_STOPPED : 0;
}

// The pair-panel Linears (int8 and bf16, nn.h) run on the team for any row count (no BLAS
// has their layouts): first each row is quantized (int8: to int16 with its scale) or rounded
// (bf16), then the dot tasks. A dot task is PAIR_TASK_ROWS rows by PAIR_TASK panels: the rows'
// activations stay in L2 while each panel's weights (16 x in pairs) serve them from L1.
#define PAIR_TASK_ROWS 96
#define PAIR_TASK 4
typedef struct {
	const nn_ops *ops;
	const float *x, *b, *ws; // ws: int8 only
	const void *w;           // int8_t (ws set) or bf16 bits
	void *a;                 // the rows' int16 or bf16 activations
	float *xs, *y;           // xs: int8 only
	int64_t rows, in, k, out, panels;
	int act;
} pair_job;

static void pair_quantize_task(void *arg, int64_t t) {
	const pair_job *j = arg;
	for (int64_t r = t * PAIR_TASK_ROWS; r < j->rows && r < (t + 1) * PAIR_TASK_ROWS; r++) {
		if (j->ws) j->ops->quantize_row((int16_t *)j->a + r * j->k, j->x + r * j->in, j->in, j->xs + r);
		else j->ops->round_bf16((uint16_t *)j->a + r * j->k, j->x + r * j->in, j->in);
	}
}

static void pair_dot_task(void *arg, int64_t t) {
	const pair_job *j = arg;
	const int64_t groups = (j->panels + PAIR_TASK - 1) / PAIR_TASK, r0 = t / groups * PAIR_TASK_ROWS;
	const int64_t p0 = t % groups * PAIR_TASK, p1 = p0 + PAIR_TASK < j->panels ? p0 + PAIR_TASK : j->panels;
	const int64_t rows = j->rows - r0 < PAIR_TASK_ROWS ? j->rows - r0 : PAIR_TASK_ROWS;
	if (j->ws)
		j->ops->dot_q8((const int16_t *)j->a + r0 * j->k, j->xs + r0, j->w, j->ws, j->b, j->y + r0 * j->out, rows,
		               j->k, p0, p1, j->out, j->act);
	else
		j->ops->dot_bf16((const uint16_t *)j->a + r0 * j->k, j->w, j->b, j->y + r0 * j->out, rows, j->k, p0, p1,
		                 j->out, j->act);
}

// linear_pairs runs the job's rows (j->a, j->xs unset) on the team; 0, -1 (no memory) or
// NN_STOPPED (stop set: between tasks).
static int linear_pairs(pair_job *j, const int32_t *stop) {
	if (team_stopped(stop)) return NN_STOPPED;
	if (j->rows == 0 || j->out == 0) return 0;
	const int64_t chunks = (j->rows + PAIR_TASK_ROWS - 1) / PAIR_TASK_ROWS;
	j->a = malloc((size_t)(j->rows * j->k + 1) * sizeof(int16_t));
	j->xs = j->ws ? malloc((size_t)j->rows * sizeof(float)) : NULL;
	if (!j->a || (j->ws && !j->xs)) {
		free(j->a), free(j->xs);
		return -1;
	}
	team_run_stoppable(chunks, pair_quantize_task, j, nn_get_threads(), stop);
	team_run_stoppable(chunks * ((j->panels + PAIR_TASK - 1) / PAIR_TASK), pair_dot_task, j, nn_get_threads(), stop);
	free(j->a), free(j->xs);
	return team_stopped(stop) ? NN_STOPPED : 0;
}

int nn_linear_q8(int level, const float *x, const int8_t *w, const float *ws, const float *b, float *y,
                 int64_t rows, int64_t in, int64_t out, int act, const int32_t *stop) {
	pair_job j = {pick(level), x, b, ws, w, NULL, NULL, y, rows, in, NN_Q8_K(in), out, panels(out), act};
	return linear_pairs(&j, stop);
}

int nn_has_bf16(int level) { return pick(level)->dot_bf16 != NULL; }

int nn_linear_bf16(int level, const float *x, const uint16_t *w, const float *b, float *y, int64_t rows,
                   int64_t in, int64_t out, int act, const int32_t *stop) {
	if (!nn_has_bf16(level)) return -2;
	pair_job j = {pick(level), x, b, NULL, w, NULL, NULL, y, rows, in, NN_BF16_K(in), out, panels(out), act};
	return linear_pairs(&j, stop);
}

// peak_task runs one thread's share of nn_peak: iters rounds, its ops in ops[t].
typedef struct {
	const nn_ops *ops;
	int fmt;
	int64_t iters;
	double ops_done[TEAM_MAX_THREADS];
} peak_job;

static void peak_task(void *arg, int64_t t) {
	peak_job *j = arg;
	j->ops_done[t] = j->ops->peak_ops(j->fmt, j->iters);
}

double nn_peak(int level, int fmt, int threads, double seconds) {
	peak_job j = {pick(level), fmt, 1 << 12, {0}};
	if (threads < 1) threads = 1;
	if (threads > TEAM_MAX_THREADS) threads = TEAM_MAX_THREADS;
	if (j.ops->peak_ops(fmt, 1) == 0) return 0;
	for (;;) { // grow iters until a run takes a tenth of the time, then time the whole
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		team_run(threads, peak_task, &j, threads);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		const double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
		if (dt >= seconds || j.iters > ((int64_t)1 << 40)) {
			double total = 0;
			for (int t = 0; t < threads; t++) total += j.ops_done[t];
			return total / dt;
		}
		j.iters = dt * 10 < seconds ? j.iters * 10 : (int64_t)((double)j.iters * seconds / dt * 1.05) + 1;
	}
}

int64_t nn_pack_q8(int8_t *dst, float *scale, const float *w, int64_t out, int64_t in) {
	for (int64_t i = 0; i < out * in; i++)
		if (!isfinite(w[i])) return i;
	const int64_t k = NN_Q8_K(in), groups = k / NN_Q8_GROUP;
	memset(dst, 0, (size_t)(panels(out) * NN_PANEL * k));
	for (int64_t i = 0; i < panels(out) * NN_PANEL * groups; i++) scale[i] = 1;
#pragma omp parallel for num_threads(nn_get_threads()) if (out * in >= PAR_MIN)
	for (int64_t o = 0; o < out; o++) {
		const float *wo = w + o * in;
		for (int64_t g = 0; g < groups; g++) {
			const int64_t i0 = g * NN_Q8_GROUP, i1 = i0 + NN_Q8_GROUP < in ? i0 + NN_Q8_GROUP : in;
			float m = 0;
			for (int64_t i = i0; i < i1; i++) m = fabsf(wo[i]) > m ? fabsf(wo[i]) : m;
			float *s = scale + ((o / NN_PANEL) * groups + g) * NN_PANEL + o % NN_PANEL;
			*s = m > 0 ? m / 127 : 1;
			for (int64_t i = i0; i < i1; i++) {
				float q = rintf(wo[i] / *s);
				dst[nn_pair_at(o, i, k)] = (int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
			}
		}
	}
	return -1;
}

int64_t nn_pack_bf16(uint16_t *dst, const float *w, int64_t out, int64_t in) {
	const int64_t k = NN_BF16_K(in);
	memset(dst, 0, (size_t)(panels(out) * NN_PANEL * k) * sizeof(uint16_t));
	for (int64_t o = 0; o < out; o++)
		for (int64_t i = 0; i < in; i++) {
			const uint16_t h = nn_bf16_round1(w[o * in + i]);
			if ((h & 0x7f80) == 0x7f80) return o * in + i; // inf or NaN
			dst[nn_pair_at(o, i, k)] = h;
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
	// A query's few tokens stay on the calling thread.
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (parallel(start[nseq], hidden))
	for (int64_t j = 0; j < jobs; j++) {
		const int64_t s = j / heads, h = j % heads;
		const int64_t L = start[s + 1] - start[s];
		if (L == 0) continue;
		const float *q = qkv + start[s] * ld + h * head_dim;
		ops->attend(q, q + hidden, q + 2 * hidden, ld, ctx + start[s] * hidden + h * head_dim, hidden, L, head_dim,
		            scale, scratch + (int64_t)omp_get_thread_num() * scratch_per_thread);
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
