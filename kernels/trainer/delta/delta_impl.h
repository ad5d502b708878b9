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

/* nl_delta_emit64 (AVX2 encode) appends the elements of a 64-element block at new_block
 * (numbered from pos) whose bits in m are set. The first two are written without branches: with 0.5-2% of
 * elements changed, a block holds 0-2 changes and which ones is random, so a branch per block
 * or per bit would be mispredicted about every other block. When m runs out early the
 * write lands at entry k, past the last real entry and inside the caller's buffers (a block
 * with a zero bit has fewer changes than elements, so k < the room for n entries), and is
 * overwritten by the next entry or never counted. */
static inline int64_t nl_delta_emit64(uint64_t m, const uint8_t *new_block, int32_t elem_size,
                                      uint64_t pos, uint8_t *idx, int32_t idx_size,
                                      uint8_t *vals, int64_t k) {
  for (int r = 0; r < 2; r++) {
    int e = __builtin_ctzll(m | (1ull << 63));
    nl_delta_put(idx, idx_size, k, pos + (uint64_t)e, vals, elem_size, new_block + e * elem_size);
    k += m != 0;
    m &= m - 1;
  }
  while (m) {
    int e = __builtin_ctzll(m);
    nl_delta_put(idx, idx_size, k++, pos + (uint64_t)e, vals, elem_size, new_block + e * elem_size);
    m &= m - 1;
  }
  return k;
}

#endif
