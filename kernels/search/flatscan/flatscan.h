// flatscan: exact k-nearest-neighbor search over row-major float32 rows (a flat index),
// streamed in stripes, with the answers of FAISS's IndexFlat search (1.7.3 and 1.12.0): the
// same 1024-row blocks (faiss/utils/distances.cpp, exhaustive_inner_product_blas / exhaustive_L2sqr_blas)
// and the same heap, whose tie-breaking this file reproduces (faiss/utils/Heap.h,
// ordered_key_value.h). The inner products are dotmm's (kernels/linalg/dotmm), not FAISS's
// sgemm: a query's scores are the same bits whatever other queries share its search (FAISS's
// are not: sgemm's blocking follows the batch), which costs FAISS's last bits (scores within
// a few ulps; ids the same but where two rows' scores are that close).
//
// A search is flatscan_start, then flatscan_scan over consecutive stripes of rows (each
// one starting on a block boundary), then flatscan_finish. dist/labels (nq x k, caller-owned)
// hold the running heaps and, after finish, the results, best first; missing hits are
// label -1 with FAISS's neutral distance (-FLT_MAX for IP, FLT_MAX for L2).
// Rows may start at any byte address (a flat index file's vectors start at byte 45).
#ifndef NEEDLE_FLATSCAN_H
#define NEEDLE_FLATSCAN_H
#include <stdint.h>

enum { FLATSCAN_IP = 0, FLATSCAN_L2 = 1 }; // FAISS's MetricType values
enum { FLATSCAN_BLOCK = 1024 };             // FAISS's distance_compute_blas_database_bs

void flatscan_start(int metric, int64_t nq, int64_t k, float *dist, int64_t *labels);

// Folds rows [row0, row0 + nrows) into the heaps; y points at row row0, row0 is a multiple of
// FLATSCAN_BLOCK. x: nq x d queries; x_norms: their squared norms (L2; else unused).
// scratch: nq * nrows + nrows floats. level is a SIMD level (platform/cpu/cpu.h):
// NL_LEVEL_REF, the test oracle, runs plain loops on one thread; the others dotmm's kernels,
// blocks and heaps on `threads` threads.
void flatscan_scan(int32_t level, int metric, const float *x, const float *x_norms, int64_t nq,
                   const void *y, int64_t row0, int64_t nrows, int64_t d, int64_t k,
                   float *dist, int64_t *labels, float *scratch, int threads);

// Folds, for each of nq queries, its r candidate rows into its heap: rows holds nq x r x d
// floats (query q's candidates at rows + q * r * d, gathered by the caller), cand their nq x r
// labels (-1: no candidate). The heaps see the candidates in the order given: sorted by
// label, the result is FAISS's IndexFlat search restricted to those rows. x_norms as in
// flatscan_scan; scratch: 2 * nq * r floats; queries on threads.
void flatscan_rescore(int32_t level, int metric, const float *x, const float *x_norms, int64_t nq,
                     const float *rows, const int64_t *cand, int64_t r, int64_t d, int64_t k,
                     float *dist, int64_t *labels, float *scratch, int threads);

void flatscan_finish(int metric, int64_t nq, int64_t k, float *dist, int64_t *labels);

// out[i] = the squared norm of row i of x (n rows of d), summed in order.
void flatscan_norms(const float *x, int64_t n, int64_t d, float *out);
#endif
