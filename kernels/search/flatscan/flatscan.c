#include "flatscan.h"

#include <float.h>
#include <omp.h>
#include <string.h>

#include "../../linalg/dotmm/dotmm.h"

// Compiled for baseline x86-64 (cgo CFLAGS name no -m flags): no FMA, so the L2 distance
// x_norm + y_norm - 2 * ip rounds as FAISS's does. The inner products come from dotmm
// (flatscan_avx2.c, flatscan_avx512.c): batch-invariant, see flatscan.h.
DOTMM_DECLARE(flatscan)

// Rows of a mapped index file may be misaligned: read them through a 1-byte-aligned type.
typedef float ufloat __attribute__((aligned(1)));

// better(metric, a, b): a is a strictly better score than b (FAISS's C::cmp(b, a)).
static inline int better(int metric, float a, float b) { return metric == FLATSCAN_IP ? a > b : a < b; }

// worse2: FAISS's C::cmp2(a1, b1, a2, b2) for the heap of this metric. The heap's top is the
// worst (score, id) pair: for IP (CMin) the smallest score, smallest id among equals; for L2
// (CMax) the largest distance, largest id among equals.
static inline int worse2(int metric, float a1, float b1, int64_t a2, int64_t b2) {
	if (metric == FLATSCAN_IP) return a1 < b1 || (a1 == b1 && a2 < b2);
	return a1 > b1 || (a1 == b1 && a2 > b2);
}

// The heaps are FAISS's 1-based binary heaps stored in a 0-based array (Heap.h).
static void heap_replace_top(int metric, int64_t k, float *val, int64_t *ids, float v, int64_t id) {
	val--, ids--;
	int64_t i = 1;
	for (;;) {
		int64_t i1 = i << 1, i2 = i1 + 1;
		if (i1 > k) break;
		int64_t c = (i2 == k + 1 || worse2(metric, val[i1], val[i2], ids[i1], ids[i2])) ? i1 : i2;
		if (worse2(metric, v, val[c], id, ids[c])) break;
		val[i] = val[c], ids[i] = ids[c];
		i = c;
	}
	val[i] = v, ids[i] = id;
}

// heap_pop moves the top out (the caller saved it): FAISS's heap_pop sifts the last element
// down through a heap that still counts it, which is a replace_top with that element.
static void heap_pop(int metric, int64_t k, float *val, int64_t *ids) {
	heap_replace_top(metric, k, val, ids, val[k - 1], ids[k - 1]);
}

static float neutral(int metric) { return metric == FLATSCAN_IP ? -FLT_MAX : FLT_MAX; }

void flatscan_start(int metric, int64_t nq, int64_t k, float *dist, int64_t *labels) {
	for (int64_t i = 0; i < nq * k; i++) dist[i] = neutral(metric), labels[i] = -1;
}

// heap_reorder: pops the worst to the end, so the result is best first; FAISS keeps only
// real hits (id != -1) and pads with neutral / -1.
void flatscan_finish(int metric, int64_t nq, int64_t k, float *dist, int64_t *labels) {
	for (int64_t q = 0; q < nq; q++) {
		float *val = dist + q * k;
		int64_t *ids = labels + q * k, kept = 0;
		for (int64_t i = 0; i < k; i++) {
			float v = val[0];
			int64_t id = ids[0];
			heap_pop(metric, k - i, val, ids);
			val[k - kept - 1] = v, ids[k - kept - 1] = id;
			if (id != -1) kept++;
		}
		memmove(val, val + k - kept, kept * sizeof *val);
		memmove(ids, ids + k - kept, kept * sizeof *ids);
		for (int64_t i = kept; i < k; i++) val[i] = neutral(metric), ids[i] = -1;
	}
}

void flatscan_norms(const float *x, int64_t n, int64_t d, float *out) {
	for (int64_t i = 0; i < n; i++) {
		const ufloat *r = (const ufloat *)((const char *)x + 4 * i * d);
		float s = 0;
		for (int64_t t = 0; t < d; t++) s += r[t] * r[t];
		out[i] = s;
	}
}

// QUERY_GROUP: a block's scores are computed for this many queries at a time, so that the
// group's query rows (64 x 1.5 KB at d = 384) stay in L2 while the block's rows stream by.
// The (block, query group) pairs are the parallel tasks: a stripe of one block still
// spreads a big batch over the threads.
#define QUERY_GROUP 64

// scores computes the inner products of the rows of group g of the queries with block b's rows
// into out[q * nb + j] of the block's scores (nb rows from y).
static void scores(dotmm_fn dot, const float *x, int64_t nq, int64_t g, const char *y, int64_t nb, int64_t d,
                   float *out) {
	const int64_t q = g * QUERY_GROUP;
	dot(x + q * d, d, nq - q < QUERY_GROUP ? nq - q : QUERY_GROUP, (const float *)y, d, nb, d, out + q * nb, nb);
}

// push folds n scores into one query's heap (val, ids: k entries) in order: ip[j] is the
// inner product of the query with row j, whose label is cand[j] (cand NULL: id0 + j; a label
// of -1 is no row and is skipped). For L2, ynorm[j] is the row's squared norm and x_norm the
// query's.
static void push(int metric, int64_t k, float *val, int64_t *ids, const float *ip, float x_norm,
                 const float *ynorm, const int64_t *cand, int64_t id0, int64_t n) {
	float thresh = val[0];
	for (int64_t j = 0; j < n; j++) {
		const int64_t id = cand ? cand[j] : id0 + j;
		if (id < 0) continue;
		float s = ip[j];
		if (metric == FLATSCAN_L2) {
			s = x_norm + ynorm[j] - 2 * s;
			s = s < 0 ? 0 : s; // FAISS: roundoff can make identical vectors < 0
		}
		if (better(metric, s, thresh)) {
			heap_replace_top(metric, k, val, ids, s, id);
			thresh = val[0];
		}
	}
}

static inline int64_t block_rows(int64_t nrows, int64_t j0) {
	return nrows - j0 < FLATSCAN_BLOCK ? nrows - j0 : FLATSCAN_BLOCK;
}

void flatscan_scan(int32_t level, int metric, const float *x, const float *x_norms, int64_t nq,
                   const void *y, int64_t row0, int64_t nrows, int64_t d, int64_t k,
                   float *dist, int64_t *labels, float *scratch, int threads) {
	const int64_t nblocks = (nrows + FLATSCAN_BLOCK - 1) / FLATSCAN_BLOCK;
	float *ynorm = scratch + nq * nrows;
	const dotmm_fn dot = flatscan_dotmm_pick(level);
	const int64_t groups = (nq + QUERY_GROUP - 1) / QUERY_GROUP;
	if (level == NL_LEVEL_REF) threads = 1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
	for (int64_t t = 0; t < nblocks * groups; t++) {
		const int64_t b = t / groups, j0 = b * FLATSCAN_BLOCK;
		scores(dot, x, nq, t % groups, (const char *)y + 4 * j0 * d, block_rows(nrows, j0), d, scratch + j0 * nq);
		if (metric == FLATSCAN_L2 && t % groups == 0)
			flatscan_norms((const float *)((const char *)y + 4 * j0 * d), block_rows(nrows, j0), d, ynorm + j0);
	}
	// Each query's heap sees its scores in row order, as in FAISS's HeapResultHandler.
#pragma omp parallel for schedule(static) num_threads(threads)
	for (int64_t q = 0; q < nq; q++) {
		float *val = dist + q * k;
		int64_t *ids = labels + q * k;
		for (int64_t b = 0; b < nblocks; b++) {
			const int64_t j0 = b * FLATSCAN_BLOCK, nb = block_rows(nrows, j0);
			push(metric, k, val, ids, scratch + j0 * nq + q * nb, x_norms ? x_norms[q] : 0, ynorm + j0, NULL, row0 + j0, nb);
		}
	}
}

void flatscan_rescore(int32_t level, int metric, const float *x, const float *x_norms, int64_t nq,
                     const float *rows, const int64_t *cand, int64_t r, int64_t d, int64_t k,
                     float *dist, int64_t *labels, float *scratch, int threads) {
	const dotmm_fn dot = flatscan_dotmm_pick(level);
	if (level == NL_LEVEL_REF) threads = 1;
#pragma omp parallel for schedule(dynamic) num_threads(threads)
	for (int64_t q = 0; q < nq; q++) {
		const float *y = rows + q * r * d;
		float *ip = scratch + q * r, *ynorm = scratch + nq * r + q * r;
		scores(dot, x + q * d, 1, 0, (const char *)y, r, d, ip);
		if (metric == FLATSCAN_L2) flatscan_norms(y, r, d, ynorm);
		push(metric, k, dist + q * k, labels + q * k, ip, x_norms ? x_norms[q] : 0, ynorm, cand + q * r, 0, r);
	}
}
