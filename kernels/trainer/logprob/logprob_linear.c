// The fused linear logprob: logits chunks from OpenBLAS sgemm, folded online into row states.
#include <stdio.h>
#include <stdlib.h>

#include <cblas.h>

#include "logprob.h"

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
  stats_fn stats = nl_stats_for(level);
  float inv_t = 1.0f / a->temperature;
  int64_t rows = a->n < NL_LINEAR_CHUNK_ROWS ? a->n : NL_LINEAR_CHUNK_ROWS;
  int64_t vc = a->v < NL_LINEAR_CHUNK_VOCAB ? a->v : NL_LINEAR_CHUNK_VOCAB;
  float* logits = malloc((size_t)(rows * vc) * sizeof(float));  // one [rows, vc] chunk
  nl_stats* st = malloc((size_t)rows * sizeof(nl_stats));
  float* y_label = malloc((size_t)rows * sizeof(float));
  if (!logits || !st || !y_label) {
    free(logits), free(st), free(y_label);
    snprintf(err, errlen, "out of memory for a %lld x %lld logits chunk", (long long)rows,
             (long long)vc);
    return -1;
  }
  for (int64_t r0 = 0; r0 < a->n; r0 += rows) {
    int64_t nr = a->n - r0 < rows ? a->n - r0 : rows;
    for (int64_t i = 0; i < nr; i++) st[i] = NL_STATS_EMPTY, y_label[i] = 0.0f;
    for (int64_t v0 = 0; v0 < a->v; v0 += vc) {
      int64_t nv = a->v - v0 < vc ? a->v - v0 : vc;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)nv, (int)h, 1.0f,
                  hidden + r0 * h, (int)h, lm_head + v0 * h, (int)h, 0.0f, logits, (int)nv);
      for (int64_t i = 0; i < nr; i++) {
        const float* row = logits + i * nv;
        stats(row, NL_F32, nv, inv_t, &st[i]);
        int64_t l = a->labels[r0 + i];
        if (l != a->ignore_index && l >= v0 && l < v0 + nv) y_label[i] = row[l - v0] * inv_t;
      }
    }
    for (int64_t i = 0; i < nr; i++) nl_finish_row(a, r0 + i, st[i], y_label[i]);
  }
  free(logits), free(st), free(y_label);
  return 0;
}
