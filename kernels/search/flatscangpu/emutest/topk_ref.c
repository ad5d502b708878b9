// The scalar reference of topk_ref.h: every candidate of a query sorted by (value, label).
#include "topk_ref.h"

#include <float.h>
#include <stdlib.h>

typedef struct {
  float v;
  int64_t label;
} hit;

static int better_ip(const void* a, const void* b) {  // larger first, then lower label
  const hit *x = a, *y = b;
  if (x->v != y->v) return x->v > y->v ? -1 : 1;
  return (x->label > y->label) - (x->label < y->label);
}

static int better_l2(const void* a, const void* b) {  // smaller first, then lower label
  const hit *x = a, *y = b;
  if (x->v != y->v) return x->v < y->v ? -1 : 1;
  return (x->label > y->label) - (x->label < y->label);
}

void nl_topk_ref(const float* scores, int64_t nq, int64_t n, int64_t ld, const float* xnorm,
                 const float* qnorm, int64_t k, float* dist, int64_t* labels) {
  hit* hits = malloc(sizeof(hit) * (size_t)(n > 0 ? n : 1));
  for (int64_t q = 0; q < nq; q++) {
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
      float v = scores[q * ld + i];
      if (xnorm) {
        v = (qnorm[q] + xnorm[i]) - 2.0f * v;
        if (v < 0.0f) v = 0.0f;
      }
      if (v == v) hits[m++] = (hit){v, i};
    }
    qsort(hits, (size_t)m, sizeof(hit), xnorm ? better_l2 : better_ip);
    for (int64_t j = 0; j < k; j++) {
      dist[q * k + j] = j < m ? hits[j].v : (xnorm ? FLT_MAX : -FLT_MAX);
      labels[q * k + j] = j < m ? hits[j].label : -1;
    }
  }
  free(hits);
}
