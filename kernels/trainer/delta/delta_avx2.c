/* AVX2 variants. Encode: compare 64 elements of old and new per step into one 64-bit mask of
 * changed elements (pext folds the 2-bit-per-element byte mask of 16-bit compares), emitted
 * by nl_delta_emit64 (tzcnt, the first two without branches). */
#include <immintrin.h>

#include "delta_impl.h"

#define AVX2 __attribute__((target("avx2,bmi,bmi2,popcnt")))

/* changed16 returns one bit per 16-bit element of 32 elements at o and w (bit set = differ). */
AVX2 static inline uint32_t changed16(const uint8_t *o, const uint8_t *w) {
  __m256i e0 = _mm256_cmpeq_epi16(_mm256_loadu_si256((const __m256i *)o),
                                  _mm256_loadu_si256((const __m256i *)w));
  __m256i e1 = _mm256_cmpeq_epi16(_mm256_loadu_si256((const __m256i *)(o + 32)),
                                  _mm256_loadu_si256((const __m256i *)(w + 32)));
  uint64_t eq = (uint32_t)_mm256_movemask_epi8(e0) | ((uint64_t)(uint32_t)_mm256_movemask_epi8(e1) << 32);
  return ~(uint32_t)_pext_u64(eq, 0x5555555555555555ull);
}

/* changed32 returns one bit per 32-bit element of 16 elements at o and w. */
AVX2 static inline uint32_t changed32(const uint8_t *o, const uint8_t *w) {
  uint32_t eq = 0;
  for (int v = 0; v < 2; v++) {
    __m256i e = _mm256_cmpeq_epi32(_mm256_loadu_si256((const __m256i *)(o + 32 * v)),
                                   _mm256_loadu_si256((const __m256i *)(w + 32 * v)));
    eq |= (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(e)) << (8 * v);
  }
  return ~eq & 0xffffu;
}

AVX2 int64_t nl_delta_encode_avx2(const uint8_t *old_bits, const uint8_t *new_bits,
                                  int64_t n, int32_t elem_size, uint64_t first, uint8_t *idx,
                                  int32_t idx_size, uint8_t *vals) {
  int64_t k = 0, i = 0;
  for (; i + 64 <= n; i += 64) {
    const uint8_t *o = old_bits + i * elem_size, *w = new_bits + i * elem_size;
    uint64_t m;
    if (elem_size == 2) {
      m = changed16(o, w) | (uint64_t)changed16(o + 64, w + 64) << 32;
    } else {
      m = changed32(o, w) | (uint64_t)changed32(o + 64, w + 64) << 16 |
          (uint64_t)changed32(o + 128, w + 128) << 32 | (uint64_t)changed32(o + 192, w + 192) << 48;
    }
    k = nl_delta_emit64(m, w, elem_size, first + (uint64_t)i, idx, idx_size, vals, k);
  }
  return k + nl_delta_encode_ref(old_bits + i * elem_size, new_bits + i * elem_size, n - i,
                                 elem_size, first + (uint64_t)i, idx + k * idx_size, idx_size,
                                 vals + k * elem_size);
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
