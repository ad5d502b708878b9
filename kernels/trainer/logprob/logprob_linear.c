// The fused linear logprob: logits chunks from dotmm (kernels/linalg/dotmm, compiled in
// logprob_avx2.c and logprob_avx512.c), folded online into row states; chunks of rows run on
// OpenMP's threads (OMP_NUM_THREADS, as OpenBLAS's did when it computed the logits).
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../linalg/dotmm/dotmm.h"
#include "logprob.h"

DOTMM_DECLARE(logprob)

int nl_linear_logprob_run(const float* hidden, int64_t h, const float* lm_head,
                          const nl_logprob_args* a, int32_t level, char* err, size_t errlen) {
  if (nl_check_args(a, level, err, errlen)) return -1;
  if (h < 1 || h > INT32_MAX || a->v > INT32_MAX) {
    snprintf(err, errlen, "bad shape: hidden size %lld, vocab %lld (each must be in [1, 2^31))",
             (long long)h, (long long)a->v);
    return -1;
  }
  if (a->n == 0) return 0;
  if (!hidden || !lm_head) {
    snprintf(err, errlen, "hidden and lm_head are required");
    return -1;
  }
  const stats_fn stats = nl_stats_for(level);
  const dotmm_fn dot = logprob_dotmm_pick(level);
  const float inv_t = 1.0f / a->temperature;
  const int64_t rows = nl_linear_chunk_rows(h, a->n, omp_get_max_threads()), vc = a->v < NL_LINEAR_CHUNK_VOCAB ? a->v : NL_LINEAR_CHUNK_VOCAB;
  const int64_t chunks = (a->n + rows - 1) / rows;
  int failed = 0;
#pragma omp parallel reduction(| : failed)
  {
    // Each thread's scratch: one [rows, vc] logits chunk and its rows' states.
    float* logits = malloc((size_t)(rows * vc) * sizeof(float));
    nl_stats* st = malloc((size_t)rows * sizeof(nl_stats));
    float* y_label = malloc((size_t)rows * sizeof(float));
    failed = !logits || !st || !y_label;
#pragma omp for schedule(dynamic, 1)
    for (int64_t c = 0; c < chunks; c++) {
      if (failed) continue;
      const int64_t r0 = c * rows, nr = a->n - r0 < rows ? a->n - r0 : rows;
      for (int64_t i = 0; i < nr; i++) st[i] = NL_STATS_EMPTY, y_label[i] = 0.0f;
      for (int64_t v0 = 0; v0 < a->v; v0 += vc) {
        const int64_t nv = a->v - v0 < vc ? a->v - v0 : vc;
        dot(hidden + r0 * h, h, nr, lm_head + v0 * h, h, nv, h, logits, nv);
        for (int64_t i = 0; i < nr; i++) {
          const float* row = logits + i * nv;
          stats(row, NL_F32, nv, inv_t, &st[i]);
          const int64_t l = a->labels[r0 + i];
          if (l != a->ignore_index && l >= v0 && l < v0 + nv) y_label[i] = row[l - v0] * inv_t;
        }
      }
      for (int64_t i = 0; i < nr; i++) nl_finish_row(a, r0 + i, st[i], y_label[i]);
    }
    free(logits), free(st), free(y_label);
  }
  if (failed) {
    snprintf(err, errlen, "out of memory for a %lld x %lld logits chunk per thread", (long long)rows, (long long)vc);
    return -1;
  }
  return 0;
}
