/* Scalar reference: the oracle every SIMD and CUDA variant is tested against. */
#include "delta_impl.h"

int64_t nl_delta_encode_ref(const uint8_t *old_bits, const uint8_t *new_bits, int64_t n,
                                int32_t elem_size, uint64_t first, uint8_t *idx,
                                int32_t idx_size, uint8_t *vals) {
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++) {
    const uint8_t *o = old_bits + i * elem_size, *w = new_bits + i * elem_size;
    if (memcmp(o, w, (size_t)elem_size) != 0) {
      nl_delta_put(idx, idx_size, k, first + (uint64_t)i, vals, elem_size, w);
      k++;
    }
  }
  return k;
}

int64_t nl_delta_check_ref(const uint8_t *idx, int32_t idx_size, int64_t from, int64_t nnz,
                               uint64_t n) {
  for (int64_t k = from; k < nnz; k++) {
    uint64_t g = nl_delta_get_idx(idx, idx_size, k);
    if (g >= n || (k > 0 && g <= nl_delta_get_idx(idx, idx_size, k - 1))) {
      return k;
    }
  }
  return nnz;
}
