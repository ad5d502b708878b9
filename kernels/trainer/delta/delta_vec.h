/* Internal to kernels/trainer/delta: a SIMD level's encode and check, written once and compiled
 * per ISA: delta_avx2.c (VW 8) and delta_avx512.c (VW 16) set a target pragma, define VW (32-bit
 * lanes of a vector) and SUFFIX, and include this file, which defines nl_delta_encode_SUFFIX and
 * nl_delta_check_SUFFIX (delta_impl.h).
 *
 * Encode reads 64 elements per step: mask64 gives the bits of those that differ (bit e set =
 * element e changed), the step prefetches both inputs ahead and appends the set bits with
 * tzcnt. Everything is inlined per (element size, index size), so every append (nl_delta_put)
 * is two plain moves. Tails shorter than 64 elements go to the reference.
 *
 * The compares are per-ISA intrinsics (below): AVX-512 reads its mask registers, AVX2 packs
 * compare results and reads them with movemask. At VW 16 without AVX-512F the AVX2 ones run on
 * each 32-byte half: that is the tests' lanes16 build (test/), which runs the 16-lane logic (its
 * check steps and its straight appends) on AVX2 machines. */
#include <immintrin.h>

#include "delta_impl.h"

#define NL_DELTA_CAT2(a, b) a##_##b
#define NL_DELTA_CAT(a, b) NL_DELTA_CAT2(a, b)
#define NL_DELTA_INLINE static inline __attribute__((always_inline))

#if VW == 16 && defined(__AVX512F__)
/* ne_line returns one bit per element (es bytes) of the 64 bytes at o and w: set = differ. */
NL_DELTA_INLINE uint32_t ne_line(const uint8_t *o, const uint8_t *w, int es) {
  const __m512i a = _mm512_loadu_si512(o), b = _mm512_loadu_si512(w);
  return es == 2 ? _cvtmask32_u32(_mm512_cmpneq_epi16_mask(a, b)) : _mm512_cmpneq_epi32_mask(a, b);
}

/* bad32 and bad64: whether any of the VW * 4 / size indices at cur is not above the one before
 * it (prev = cur less one entry) or not below lim (for bad32, only when !full). */
NL_DELTA_INLINE int bad32(const uint8_t *cur, const uint8_t *prev, uint32_t lim, int full) {
  const __m512i c = _mm512_loadu_si512(cur);
  __mmask16 bad = _mm512_cmple_epu32_mask(c, _mm512_loadu_si512(prev));
  if (!full) bad |= _mm512_cmpge_epu32_mask(c, _mm512_set1_epi32((int32_t)lim));
  return bad != 0;
}
NL_DELTA_INLINE int bad64(const uint8_t *cur, const uint8_t *prev, uint64_t lim) {
  const __m512i c = _mm512_loadu_si512(cur);
  return (_mm512_cmple_epu64_mask(c, _mm512_loadu_si512(prev)) |
          _mm512_cmpge_epu64_mask(c, _mm512_set1_epi64((int64_t)lim))) != 0;
}
#else
/* ne_line: for 16-bit elements the compare results of both 32-byte halves are packed to bytes
 * (packs works per 128-bit lane, so the 64-bit quarters are put back in order) and read out
 * with one movemask. */
NL_DELTA_INLINE uint32_t ne_line(const uint8_t *o, const uint8_t *w, int es) {
  const __m256i o0 = _mm256_loadu_si256((const __m256i *)o), w0 = _mm256_loadu_si256((const __m256i *)w);
  const __m256i o1 = _mm256_loadu_si256((const __m256i *)(o + 32));
  const __m256i w1 = _mm256_loadu_si256((const __m256i *)(w + 32));
  if (es == 2) {
    const __m256i p = _mm256_packs_epi16(_mm256_cmpeq_epi16(o0, w0), _mm256_cmpeq_epi16(o1, w1));
    return ~(uint32_t)_mm256_movemask_epi8(_mm256_permute4x64_epi64(p, _MM_SHUFFLE(3, 1, 2, 0)));
  }
  const uint32_t eq = (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(o0, w0))) |
                      (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(o1, w1))) << 8;
  return ~eq & 0xffffu;
}

/* Unsigned a > b (AVX2 compares are signed: flip the sign bits). */
NL_DELTA_INLINE __m256i gtu32(__m256i a, __m256i b) {
  const __m256i s = _mm256_set1_epi32((int32_t)0x80000000u);
  return _mm256_cmpgt_epi32(_mm256_xor_si256(a, s), _mm256_xor_si256(b, s));
}
NL_DELTA_INLINE __m256i gtu64(__m256i a, __m256i b) {
  const __m256i s = _mm256_set1_epi64x((int64_t)0x8000000000000000ull);
  return _mm256_cmpgt_epi64(_mm256_xor_si256(a, s), _mm256_xor_si256(b, s));
}

/* bad32 and bad64 as above, on each 32-byte half. */
NL_DELTA_INLINE int bad32(const uint8_t *cur, const uint8_t *prev, uint32_t lim, int full) {
  int bad = 0;
  for (int h = 0; h < VW / 8; h++) {
    const __m256i c = _mm256_loadu_si256((const __m256i *)(cur + 32 * h));
    __m256i good = gtu32(c, _mm256_loadu_si256((const __m256i *)(prev + 32 * h)));
    if (!full) good = _mm256_and_si256(good, gtu32(_mm256_set1_epi32((int32_t)lim), c));
    bad |= _mm256_movemask_epi8(good) != -1;
  }
  return bad;
}
NL_DELTA_INLINE int bad64(const uint8_t *cur, const uint8_t *prev, uint64_t lim) {
  int bad = 0;
  for (int h = 0; h < VW / 8; h++) {
    const __m256i c = _mm256_loadu_si256((const __m256i *)(cur + 32 * h));
    const __m256i good = _mm256_and_si256(gtu64(c, _mm256_loadu_si256((const __m256i *)(prev + 32 * h))),
                                          gtu64(_mm256_set1_epi64x((int64_t)lim), c));
    bad |= _mm256_movemask_epi8(good) != -1;
  }
  return bad;
}
#endif

/* mask64: the changed bits of the 64 elements (es bytes each) at o and w. */
NL_DELTA_INLINE uint64_t mask64(const uint8_t *o, const uint8_t *w, int es) {
  if (es == 2) return ne_line(o, w, 2) | (uint64_t)ne_line(o + 64, w + 64, 2) << 32;
  return ne_line(o, w, 4) | (uint64_t)ne_line(o + 64, w + 64, 4) << 16 |
         (uint64_t)ne_line(o + 128, w + 128, 4) << 32 | (uint64_t)ne_line(o + 192, w + 192, 4) << 48;
}

/* Bytes ahead of the step that encode prefetches in each input (a prefetch past the end does
 * not fault). Measured (bf16, 256 MiB, 1 thread, CPU time, Zen 3, AVX2): 2 KiB ahead took encode
 * from 82-102% to 109-117% of the one-stream read loop at 0.5-2% changed; 512 B gained half that.
 * On Zen 4 (AVX2 or AVX-512 masks) 0, 1, 2 and 4 KiB ahead measured the same. */
#define NL_DELTA_AHEAD 2048

/* NL_DELTA_STRAIGHT: emit64 writes the first this many entries of a block without a branch (when
 * the block has fewer changes, into entries past the last, which the next append overwrites:
 * k <= the block's first element, so they stay within the room for n entries), the rest by a
 * loop over the set bits. Which is faster differs by CPU, so each width takes the count measured
 * best on the CPUs that run it: bf16 at 0.5-2% changed, 1 thread, CPU time, on Zen 3 (AVX2) the
 * plain loop (0) beat 1-4 straight entries by 15-60% in L2 and ~20% from memory, as those extra
 * writes cost more than the mispredicted loop exits; on Zen 4 (AVX-512; bf16 and fp32, 4 KiB and
 * 2 MiB pages) the plain loop ran at 67-78% of the read loop and 2 straight entries at 78-97%
 * (1: 68-90%, 3: 77-92%, 4: 84-90%), with AVX2 or AVX-512 masks alike. */
#if VW == 16
#define NL_DELTA_STRAIGHT 2
#else
#define NL_DELTA_STRAIGHT 0
#endif

/* emit64 appends the elements of a 64-element block at w whose bits in m are set, from entry
 * k; returns the next free entry. */
NL_DELTA_INLINE int64_t emit64(uint64_t m, const uint8_t *w, int es, uint64_t pos, uint8_t *idx,
                               int is, uint8_t *vals, int64_t k) {
  for (int j = 0; j < NL_DELTA_STRAIGHT; j++) {
    int e = __builtin_ctzll(m | 1ull << 63); /* 63 when m is 0: a spare write in the block */
    nl_delta_put(idx, is, k, pos + (uint64_t)e, vals, es, w + es * e);
    k += m != 0;
    m &= m - 1;
  }
  for (; m; m &= m - 1) {
    int e = __builtin_ctzll(m);
    nl_delta_put(idx, is, k++, pos + (uint64_t)e, vals, es, w + es * e);
  }
  return k;
}

NL_DELTA_INLINE int64_t blocks(const uint8_t *old_bits, const uint8_t *new_bits, int64_t n, int es,
                               uint64_t first, uint8_t *idx, int is, uint8_t *vals) {
  int64_t k = 0, i = 0;
  for (; i + 64 <= n; i += 64) {
    const uint8_t *o = old_bits + i * es, *w = new_bits + i * es;
    for (int line = 0; line < es; line++) { /* a step reads 64 * es bytes = es lines of each */
      __builtin_prefetch(o + NL_DELTA_AHEAD + 64 * line);
      __builtin_prefetch(w + NL_DELTA_AHEAD + 64 * line);
    }
    k = emit64(mask64(o, w, es), w, es, first + (uint64_t)i, idx, is, vals, k);
  }
  return k + nl_delta_encode_ref(old_bits + i * es, new_bits + i * es, n - i, es,
                                 first + (uint64_t)i, idx + k * is, is, vals + k * es);
}

int64_t NL_DELTA_CAT(nl_delta_encode, SUFFIX)(const uint8_t *old_bits, const uint8_t *new_bits,
                                              int64_t n, int32_t elem_size, uint64_t first,
                                              uint8_t *idx, int32_t idx_size, uint8_t *vals) {
  const uint8_t *o = old_bits, *w = new_bits;
  if (elem_size == 2) {
    return idx_size == 4 ? blocks(o, w, n, 2, first, idx, 4, vals) : blocks(o, w, n, 2, first, idx, 8, vals);
  }
  return idx_size == 4 ? blocks(o, w, n, 4, first, idx, 4, vals) : blocks(o, w, n, 4, first, idx, 8, vals);
}

/* Check: VW * 4 / idx_size consecutive pairs per step; on a bad step, or for the tail, the
 * reference finds the exact entry. */
int64_t NL_DELTA_CAT(nl_delta_check, SUFFIX)(const uint8_t *idx, int32_t idx_size, int64_t nnz,
                                             uint64_t n) {
  if (nnz == 0) return 0;
  if (nl_delta_get_idx(idx, idx_size, 0) >= n) return 0;
  int64_t k = 1; /* entries [1, k) are checked */
  const int64_t lanes = VW * 4 / idx_size;
  if (idx_size == 4) {
    const int full = n > UINT32_MAX; /* every u32 is in range */
    const uint32_t lim = full ? UINT32_MAX : (uint32_t)n;
    for (; k + lanes <= nnz; k += lanes)
      if (bad32(idx + 4 * k, idx + 4 * (k - 1), lim, full)) break;
  } else {
    for (; k + lanes <= nnz; k += lanes)
      if (bad64(idx + 8 * k, idx + 8 * (k - 1), n)) break;
  }
  return nl_delta_check_ref(idx, idx_size, k, nnz, n);
}
