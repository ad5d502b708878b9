// topk_ref.h: the scalar C reference of the GPU flat index's top-k (flatscangpu.cu), written from
// FAISS's rules rather than from the kernel: the k best of each query's scores, better first
// (inner product: larger; L2: smaller), the lower label first among equal scores, NaN never a
// hit, and missing hits as FAISS leaves them (label -1, distance -FLT_MAX for inner product,
// FLT_MAX for L2).
#ifndef NEEDLE_FLATSCANGPU_TOPK_REF_H
#define NEEDLE_FLATSCANGPU_TOPK_REF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// nl_topk_ref: query q's n inner products are scores[q*ld ..]. With xnorm (n squared row norms)
// and qnorm (nq squared query norms) the search is L2: distance = (qnorm + xnorm) - 2 * score,
// clamped at 0 (FAISS's formula). Writes nq*k distances and labels.
void nl_topk_ref(const float* scores, int64_t nq, int64_t n, int64_t ld, const float* xnorm,
                 const float* qnorm, int64_t k, float* dist, int64_t* labels);

#ifdef __cplusplus
}
#endif

#endif  // NEEDLE_FLATSCANGPU_TOPK_REF_H
