/* Internal to kernels/trainer/delta: per-level variants behind the dispatch in delta.c.
 * Arguments are validated by delta.c; x86-64 is little-endian, which the index and value
 * layout relies on. */
#ifndef NL_DELTA_IMPL_H
#define NL_DELTA_IMPL_H

#include <stdint.h>
#include <string.h>

int64_t nl_delta_encode_ref(const uint8_t *old_bits, const uint8_t *new_bits, int64_t n,
                                int32_t elem_size, uint64_t first, uint8_t *idx,
                                int32_t idx_size, uint8_t *vals);
int64_t nl_delta_encode_avx2(const uint8_t *old_bits, const uint8_t *new_bits, int64_t n,
                                 int32_t elem_size, uint64_t first, uint8_t *idx,
                                 int32_t idx_size, uint8_t *vals);
int64_t nl_delta_encode_avx512(const uint8_t *old_bits, const uint8_t *new_bits, int64_t n,
                                   int32_t elem_size, uint64_t first, uint8_t *idx,
                                   int32_t idx_size, uint8_t *vals);

/* Check entries [from, nnz): each index below n and above the entry before it (entry from-1
 * when from > 0). Return the first bad entry, or nnz when all are good. */
int64_t nl_delta_check_ref(const uint8_t *idx, int32_t idx_size, int64_t from, int64_t nnz,
                               uint64_t n);
int64_t nl_delta_check_avx2(const uint8_t *idx, int32_t idx_size, int64_t nnz, uint64_t n);
int64_t nl_delta_check_avx512(const uint8_t *idx, int32_t idx_size, int64_t nnz, uint64_t n);

static inline uint64_t nl_delta_get_idx(const uint8_t *idx, int32_t idx_size, int64_t k) {
  if (idx_size == 4) {
    uint32_t v;
    memcpy(&v, idx + 4 * k, 4);
    return v;
  }
  uint64_t v;
  memcpy(&v, idx + 8 * k, 8);
  return v;
}

static inline void nl_delta_put(uint8_t *idx, int32_t idx_size, int64_t k, uint64_t g,
                                    uint8_t *vals, int32_t elem_size, const uint8_t *src) {
  if (idx_size == 4) {
    uint32_t g32 = (uint32_t)g;
    memcpy(idx + 4 * k, &g32, 4);
  } else {
    memcpy(idx + 8 * k, &g, 8);
  }
  if (elem_size == 2) {
    memcpy(vals + 2 * k, src, 2);
  } else {
    memcpy(vals + 4 * k, src, 4);
  }
}

#endif
