/* AVX2 variants. Encode: compare 64 elements of old and new per step into one 64-bit mask of
 * changed elements, then append the set bits with tzcnt (emit64). The block loop is inlined
 * per (element size, index size), so every append (nl_delta_put) is two plain moves. */
#include <immintrin.h>

#include "delta_impl.h"

#define AVX2 __attribute__((target("avx2,bmi,bmi2,popcnt")))
#define INLINE static inline __attribute__((always_inline))

/* Bytes ahead of the step that encode prefetches in each input (a prefetch past the end does
 * not fault). Measured (bf16, 256 MiB, 1 thread, CPU time, Zen 3): 2 KiB ahead took encode from
 * 82-102% to 109-117% of the one-stream read loop at 0.5-2% changed; 512 B gained half that. */
#define NL_DELTA_AHEAD 2048

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

/* emit64 appends the elements of a 64-element block at w whose bits in m are set, from entry
 * k; returns the next free entry. A plain loop over the set bits: on Zen 3 (bf16, 0.5-2%
 * changed, CPU time) it beat writing the first 1-4 entries without branches by 15-60% in L2
 * and ~20% from memory, as those extra writes cost more than the mispredicted loop exits. */
AVX2 INLINE int64_t emit64(uint64_t m, const uint8_t *w, int es, uint64_t pos, uint8_t *idx,
                           int is, uint8_t *vals, int64_t k) {
  for (; m; m = _blsr_u64(m)) {
    int e = (int)_tzcnt_u64(m);
    nl_delta_put(idx, is, k++, pos + (uint64_t)e, vals, es, w + es * e);
  }
  return k;
}

AVX2 INLINE int64_t encode(const uint8_t *old_bits, const uint8_t *new_bits, int64_t n, int es,
                           uint64_t first, uint8_t *idx, int is, uint8_t *vals) {
  int64_t k = 0, i = 0;
  for (; i + 64 <= n; i += 64) {
    const uint8_t *o = old_bits + i * es, *w = new_bits + i * es;
    for (int line = 0; line < es; line++) { /* a step reads 64 * es bytes = es lines of each */
      _mm_prefetch((const char *)o + NL_DELTA_AHEAD + 64 * line, _MM_HINT_T0);
      _mm_prefetch((const char *)w + NL_DELTA_AHEAD + 64 * line, _MM_HINT_T0);
    }
    uint64_t m;
    if (es == 2) {
      m = mask16(o, w) | (uint64_t)mask16(o + 64, w + 64) << 32;
    } else {
      m = mask32(o, w) | (uint64_t)mask32(o + 64, w + 64) << 16 |
          (uint64_t)mask32(o + 128, w + 128) << 32 | (uint64_t)mask32(o + 192, w + 192) << 48;
    }
    k = emit64(m, w, es, first + (uint64_t)i, idx, is, vals, k);
  }
  return k + nl_delta_encode_ref(old_bits + i * es, new_bits + i * es, n - i, es,
                                 first + (uint64_t)i, idx + k * is, is, vals + k * es);
}

AVX2 int64_t nl_delta_encode_avx2(const uint8_t *old_bits, const uint8_t *new_bits, int64_t n,
                                  int32_t elem_size, uint64_t first, uint8_t *idx,
                                  int32_t idx_size, uint8_t *vals) {
  if (elem_size == 2) {
    return idx_size == 4 ? encode(old_bits, new_bits, n, 2, first, idx, 4, vals)
                         : encode(old_bits, new_bits, n, 2, first, idx, 8, vals);
  }
  return idx_size == 4 ? encode(old_bits, new_bits, n, 4, first, idx, 4, vals)
                       : encode(old_bits, new_bits, n, 4, first, idx, 8, vals);
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
