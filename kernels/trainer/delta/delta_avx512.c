/* AVX-512 (F/BW/DQ/VL) variants. Encode: compare 64 bytes of old and new per vector; a
 * block with no change costs two loads, a compare and a branch. Changed lanes are
 * compacted with vpcompressd (16-bit values widened to 32 bits first, since vpcompressw
 * needs VBMI2) and written with masked stores, so nothing is written past the last
 * entry. Tails shorter than a block go to the reference. */
#include <immintrin.h>

#include "delta_impl.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,popcnt")))

/* emit16 appends the lanes of mask h (16 x 32-bit lanes of v) at positions pos+lane. */
AVX512 static inline int64_t emit16(__mmask16 h, __m512i v, int32_t elem_size, uint64_t pos,
                                    uint8_t *idx, int32_t idx_size, uint8_t *vals, int64_t k) {
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int c = __builtin_popcount(h);
  __mmask16 st = (__mmask16)((1u << c) - 1);
  __m512i cv = _mm512_maskz_compress_epi32(h, v);
  if (elem_size == 2) {
    _mm512_mask_cvtepi32_storeu_epi16(vals + 2 * k, st, cv);
  } else {
    _mm512_mask_storeu_epi32(vals + 4 * k, st, cv);
  }
  __m512i ci = _mm512_maskz_compress_epi32(h, iota);
  if (idx_size == 4) {
    ci = _mm512_add_epi32(ci, _mm512_set1_epi32((int32_t)(uint32_t)pos));
    _mm512_mask_storeu_epi32(idx + 4 * k, st, ci);
  } else {
    __m512i p = _mm512_set1_epi64((int64_t)pos);
    __m512i lo = _mm512_add_epi64(_mm512_cvtepu32_epi64(_mm512_castsi512_si256(ci)), p);
    __m512i hi = _mm512_add_epi64(_mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(ci, 1)), p);
    _mm512_mask_storeu_epi64(idx + 8 * k, (__mmask8)st, lo);
    _mm512_mask_storeu_epi64(idx + 8 * k + 64, (__mmask8)(st >> 8), hi);
  }
  return k + c;
}

/* emit32x16 appends the changed lanes of one 32 x 16-bit vector. */
AVX512 static inline int64_t emit32x16(__mmask32 m, __m512i w, uint64_t pos, uint8_t *idx,
                                       int32_t idx_size, uint8_t *vals, int64_t k) {
  if ((__mmask16)m) {
    __m512i lo = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(w));
    k = emit16((__mmask16)m, lo, 2, pos, idx, idx_size, vals, k);
  }
  if ((__mmask16)(m >> 16)) {
    __m512i hi = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(w, 1));
    k = emit16((__mmask16)(m >> 16), hi, 2, pos + 16, idx, idx_size, vals, k);
  }
  return k;
}

AVX512 int64_t nl_delta_encode_avx512(const uint8_t *old_bits, const uint8_t *new_bits,
                                          int64_t n, int32_t elem_size, uint64_t first,
                                          uint8_t *idx, int32_t idx_size, uint8_t *vals) {
  int64_t k = 0, i = 0;
  const int64_t per = 128 / elem_size; /* elements per 2 vectors */
  for (; i + per <= n; i += per) {
    const uint8_t *o = old_bits + i * elem_size, *w = new_bits + i * elem_size;
    __m512i a0 = _mm512_loadu_si512(o), a1 = _mm512_loadu_si512(o + 64);
    __m512i b0 = _mm512_loadu_si512(w), b1 = _mm512_loadu_si512(w + 64);
    if (elem_size == 2) {
      __mmask32 m0 = _mm512_cmpneq_epi16_mask(a0, b0), m1 = _mm512_cmpneq_epi16_mask(a1, b1);
      if ((m0 | m1) == 0) continue;
      k = emit32x16(m0, b0, first + (uint64_t)i, idx, idx_size, vals, k);
      k = emit32x16(m1, b1, first + (uint64_t)i + 32, idx, idx_size, vals, k);
    } else {
      __mmask16 m0 = _mm512_cmpneq_epi32_mask(a0, b0), m1 = _mm512_cmpneq_epi32_mask(a1, b1);
      if ((m0 | m1) == 0) continue;
      if (m0) k = emit16(m0, b0, 4, first + (uint64_t)i, idx, idx_size, vals, k);
      if (m1) k = emit16(m1, b1, 4, first + (uint64_t)i + 16, idx, idx_size, vals, k);
    }
  }
  return k + nl_delta_encode_ref(old_bits + i * elem_size, new_bits + i * elem_size, n - i,
                                     elem_size, first + (uint64_t)i, idx + k * idx_size,
                                     idx_size, vals + k * elem_size);
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
