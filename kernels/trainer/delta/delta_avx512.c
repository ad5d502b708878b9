/* AVX-512 (F/BW/DQ/VL) variants. Encode: the masks of 64 changed elements for the shared block
 * loop (delta_blocks.h), read straight from the mask registers of 64-byte compares. */
#include <immintrin.h>

#include "delta_blocks.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,bmi")))
#define INLINE static inline __attribute__((always_inline))

AVX512 INLINE uint64_t mask64(const uint8_t *o, const uint8_t *w, int es) {
  if (es == 2) {
    return _cvtmask32_u32(_mm512_cmpneq_epi16_mask(_mm512_loadu_si512(o), _mm512_loadu_si512(w))) |
           (uint64_t)_cvtmask32_u32(_mm512_cmpneq_epi16_mask(_mm512_loadu_si512(o + 64),
                                                             _mm512_loadu_si512(w + 64)))
               << 32;
  }
  uint64_t m = 0;
  for (int v = 0; v < 4; v++) {
    m |= (uint64_t)_mm512_cmpneq_epi32_mask(_mm512_loadu_si512(o + 64 * v),
                                            _mm512_loadu_si512(w + 64 * v))
         << (16 * v);
  }
  return m;
}

AVX512 int64_t nl_delta_encode_avx512(const uint8_t *old_bits, const uint8_t *new_bits,
                                      int64_t n, int32_t elem_size, uint64_t first,
                                      uint8_t *idx, int32_t idx_size, uint8_t *vals) {
  return nl_delta_encode_blocks(mask64, 2, old_bits, new_bits, n, elem_size, first, idx, idx_size,
                                vals);
}

/* Check 16 (u32) or 8 (u64) consecutive pairs per vector; on a bad vector, or for the
 * tail, the reference finds the exact entry. */
AVX512 int64_t nl_delta_check_avx512(const uint8_t *idx, int32_t idx_size, int64_t nnz,
                                         uint64_t n) {
  if (nnz == 0) return 0;
  if (nl_delta_get_idx(idx, idx_size, 0) >= n) return 0;
  int64_t k = 1; /* entries [1, k) are checked */
  const int64_t lanes = 64 / idx_size;
  if (idx_size == 4) {
    __m512i lim = _mm512_set1_epi32((int32_t)(n > UINT32_MAX ? UINT32_MAX : (uint32_t)n));
    int full = n > UINT32_MAX; /* every u32 is in range */
    for (; k + lanes <= nnz; k += lanes) {
      __m512i cur = _mm512_loadu_si512(idx + 4 * k), prev = _mm512_loadu_si512(idx + 4 * (k - 1));
      __mmask16 bad = _mm512_cmple_epu32_mask(cur, prev);
      if (!full) bad |= _mm512_cmpge_epu32_mask(cur, lim);
      if (bad) break;
    }
  } else {
    __m512i lim = _mm512_set1_epi64((int64_t)n);
    for (; k + lanes <= nnz; k += lanes) {
      __m512i cur = _mm512_loadu_si512(idx + 8 * k), prev = _mm512_loadu_si512(idx + 8 * (k - 1));
      if (_mm512_cmple_epu64_mask(cur, prev) | _mm512_cmpge_epu64_mask(cur, lim)) break;
    }
  }
  return nl_delta_check_ref(idx, idx_size, k, nnz, n);
}
