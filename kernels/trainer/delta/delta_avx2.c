/* AVX2 variants. Encode: the masks of 64 changed elements for the shared block loop
 * (delta_blocks.h). */
#include <immintrin.h>

#include "delta_blocks.h"

#define AVX2 __attribute__((target("avx2,bmi")))
#define INLINE static inline __attribute__((always_inline))

/* mask16 returns one bit per 16-bit element of 32 elements at o and w (bit set = differ):
 * the 16-bit compare results are packed to bytes (packs works per 128-bit lane, so the 64-bit
 * quarters are put back in order) and read out with movemask. */
AVX2 INLINE uint32_t mask16(const uint8_t *o, const uint8_t *w) {
  __m256i e0 = _mm256_cmpeq_epi16(_mm256_loadu_si256((const __m256i *)o),
                                  _mm256_loadu_si256((const __m256i *)w));
  __m256i e1 = _mm256_cmpeq_epi16(_mm256_loadu_si256((const __m256i *)(o + 32)),
                                  _mm256_loadu_si256((const __m256i *)(w + 32)));
  __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi16(e0, e1), _MM_SHUFFLE(3, 1, 2, 0));
  return ~(uint32_t)_mm256_movemask_epi8(p);
}

/* mask32 returns one bit per 32-bit element of 16 elements at o and w. */
AVX2 INLINE uint32_t mask32(const uint8_t *o, const uint8_t *w) {
  uint32_t eq = 0;
  for (int v = 0; v < 2; v++) {
    __m256i e = _mm256_cmpeq_epi32(_mm256_loadu_si256((const __m256i *)(o + 32 * v)),
                                   _mm256_loadu_si256((const __m256i *)(w + 32 * v)));
    eq |= (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(e)) << (8 * v);
  }
  return ~eq & 0xffffu;
}

AVX2 INLINE uint64_t mask64(const uint8_t *o, const uint8_t *w, int es) {
  if (es == 2) return mask16(o, w) | (uint64_t)mask16(o + 64, w + 64) << 32;
  return mask32(o, w) | (uint64_t)mask32(o + 64, w + 64) << 16 |
         (uint64_t)mask32(o + 128, w + 128) << 32 | (uint64_t)mask32(o + 192, w + 192) << 48;
}

AVX2 int64_t nl_delta_encode_avx2(const uint8_t *old_bits, const uint8_t *new_bits, int64_t n,
                                  int32_t elem_size, uint64_t first, uint8_t *idx,
                                  int32_t idx_size, uint8_t *vals) {
  return nl_delta_encode_blocks(mask64, 0, old_bits, new_bits, n, elem_size, first, idx, idx_size,
                                vals);
}

/* Unsigned a > b for 32-bit lanes (AVX2 compares are signed: flip the sign bits). */
AVX2 static inline __m256i gtu32(__m256i a, __m256i b) {
  const __m256i s = _mm256_set1_epi32((int32_t)0x80000000u);
  return _mm256_cmpgt_epi32(_mm256_xor_si256(a, s), _mm256_xor_si256(b, s));
}

AVX2 static inline __m256i gtu64(__m256i a, __m256i b) {
  const __m256i s = _mm256_set1_epi64x((int64_t)0x8000000000000000ull);
  return _mm256_cmpgt_epi64(_mm256_xor_si256(a, s), _mm256_xor_si256(b, s));
}

AVX2 int64_t nl_delta_check_avx2(const uint8_t *idx, int32_t idx_size, int64_t nnz,
                                     uint64_t n) {
  if (nnz == 0) return 0;
  if (nl_delta_get_idx(idx, idx_size, 0) >= n) return 0;
  int64_t k = 1; /* entries [1, k) are checked */
  const int64_t lanes = 32 / idx_size;
  if (idx_size == 4) {
    int full = n > UINT32_MAX; /* every u32 is in range */
    __m256i lim = _mm256_set1_epi32((int32_t)(uint32_t)(full ? 0 : n));
    for (; k + lanes <= nnz; k += lanes) {
      __m256i cur = _mm256_loadu_si256((const __m256i *)(idx + 4 * k));
      __m256i prev = _mm256_loadu_si256((const __m256i *)(idx + 4 * (k - 1)));
      __m256i good = gtu32(cur, prev);
      if (!full) good = _mm256_and_si256(good, gtu32(lim, cur));
      if (_mm256_movemask_epi8(good) != -1) break;
    }
  } else {
    __m256i lim = _mm256_set1_epi64x((int64_t)n);
    for (; k + lanes <= nnz; k += lanes) {
      __m256i cur = _mm256_loadu_si256((const __m256i *)(idx + 8 * k));
      __m256i prev = _mm256_loadu_si256((const __m256i *)(idx + 8 * (k - 1)));
      __m256i good = _mm256_and_si256(gtu64(cur, prev), gtu64(lim, cur));
      if (_mm256_movemask_epi8(good) != -1) break;
    }
  }
  return nl_delta_check_ref(idx, idx_size, k, nnz, n);
}
