// libneedle.so entry points for delta weight transfer, over the C kernels of kernels/trainer/delta (the
// same sources the Go package compiles) at the library's SIMD level.
#include "capi_internal.h"
#include "kernels/trainer/delta/delta.h"
#include "needle.h"

NEEDLE_API int64_t needle_delta_encode(const void* old_bits, const void* new_bits, int64_t n,
                                       int32_t elem_size, void* idx, int32_t idx_size,
                                       void* vals, char* err, int64_t err_len) {
  size_t n_err = needle_capi_errlen(err, err_len);
  int32_t level = needle_capi_level(err, n_err);
  if (level < 0) return -1;
  return nl_delta_encode(level, old_bits, new_bits, n, elem_size, 0, idx, idx_size, vals, err,
                         (int64_t)n_err);
}

NEEDLE_API int32_t needle_delta_apply(void* base, int64_t n, int32_t elem_size, const void* idx,
                                      int32_t idx_size, const void* vals, int64_t nnz, char* err,
                                      int64_t err_len) {
  size_t n_err = needle_capi_errlen(err, err_len);
  int32_t level = needle_capi_level(err, n_err);
  if (level < 0) return -1;
  return nl_delta_apply(level, base, n, elem_size, idx, idx_size, vals, nnz, err, (int64_t)n_err);
}
