/* Internal to kernels/trainer/delta: the encode loop shared by the SIMD levels (delta_avx2.c,
 * delta_avx512.c). A level supplies mask64, the bits of the 64 elements at o and w that differ
 * (bit e set = element e changed); this loop prefetches both inputs ahead and appends the set
 * bits with tzcnt. Everything here is always inlined, so it is compiled for the including
 * level's target, and inlined per (element size, index size), so every append
 * (nl_delta_put) is two plain moves. Tails shorter than 64 elements go to the reference. */
#ifndef NL_DELTA_BLOCKS_H
#define NL_DELTA_BLOCKS_H

#include "delta_impl.h"

#define NL_DELTA_INLINE static inline __attribute__((always_inline))

/* Bytes ahead of the step that encode prefetches in each input (a prefetch past the end does
 * not fault). Measured (bf16, 256 MiB, 1 thread, CPU time, Zen 3, AVX2): 2 KiB ahead took encode
 * from 82-102% to 109-117% of the one-stream read loop at 0.5-2% changed; 512 B gained half that.
 * On Zen 4 (AVX2 or AVX-512 masks) 0, 1, 2 and 4 KiB ahead measured the same. */
#define NL_DELTA_AHEAD 2048

typedef uint64_t (*nl_delta_mask64_fn)(const uint8_t *o, const uint8_t *w, int es);

/* emit64 appends the elements of a 64-element block at w whose bits in m are set, from entry
 * k; returns the next free entry. The first `straight` entries are written without a branch
 * (when m has fewer bits, into entries past the last, which the next append overwrites: k <= the
 * block's first element, so they stay within the room for n entries), the rest by a loop over the
 * set bits. Which is faster differs by CPU, so each level passes the count measured best on the
 * CPUs that run it: bf16 at 0.5-2% changed, 1 thread, CPU time, on Zen 3 (AVX2) the plain loop
 * (straight 0) beat 1-4 straight entries by 15-60% in L2 and ~20% from memory, as those extra
 * writes cost more than the mispredicted loop exits; on Zen 4 (AVX-512; bf16 and fp32, 4 KiB and
 * 2 MiB pages) the plain loop ran at 67-78% of the read loop and 2 straight entries at 78-97%
 * (1: 68-90%, 3: 77-92%, 4: 84-90%), with AVX2 or AVX-512 masks alike. */
NL_DELTA_INLINE int64_t nl_delta_emit64(int straight, uint64_t m, const uint8_t *w, int es,
                                        uint64_t pos, uint8_t *idx, int is, uint8_t *vals,
                                        int64_t k) {
  for (int j = 0; j < straight; j++) {
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

NL_DELTA_INLINE int64_t nl_delta_blocks(nl_delta_mask64_fn mask64, int straight,
                                        const uint8_t *old_bits,
                                        const uint8_t *new_bits, int64_t n, int es,
                                        uint64_t first, uint8_t *idx, int is, uint8_t *vals) {
  int64_t k = 0, i = 0;
  for (; i + 64 <= n; i += 64) {
    const uint8_t *o = old_bits + i * es, *w = new_bits + i * es;
    for (int line = 0; line < es; line++) { /* a step reads 64 * es bytes = es lines of each */
      __builtin_prefetch(o + NL_DELTA_AHEAD + 64 * line);
      __builtin_prefetch(w + NL_DELTA_AHEAD + 64 * line);
    }
    k = nl_delta_emit64(straight, mask64(o, w, es), w, es, first + (uint64_t)i, idx, is, vals,
                        k);
  }
  return k + nl_delta_encode_ref(old_bits + i * es, new_bits + i * es, n - i, es,
                                 first + (uint64_t)i, idx + k * is, is, vals + k * es);
}

/* nl_delta_encode_blocks is a level's encode: nl_delta_blocks with constant sizes. */
NL_DELTA_INLINE int64_t nl_delta_encode_blocks(nl_delta_mask64_fn mask64, int straight,
                                               const uint8_t *old_bits, const uint8_t *new_bits,
                                               int64_t n, int32_t elem_size, uint64_t first,
                                               uint8_t *idx, int32_t idx_size, uint8_t *vals) {
  const uint8_t *o = old_bits, *w = new_bits;
  if (elem_size == 2) {
    return idx_size == 4 ? nl_delta_blocks(mask64, straight, o, w, n, 2, first, idx, 4, vals)
                         : nl_delta_blocks(mask64, straight, o, w, n, 2, first, idx, 8, vals);
  }
  return idx_size == 4 ? nl_delta_blocks(mask64, straight, o, w, n, 4, first, idx, 4, vals)
                       : nl_delta_blocks(mask64, straight, o, w, n, 4, first, idx, 8, vals);
}

#endif
