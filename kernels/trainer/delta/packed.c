/* The payload of a packed delta record (weights/wire/codec.go: the format, the decoder and the
 * choice of version and of dense records): gap words, low byte planes and exceptions, written
 * from the entries nl_delta_encode found (delta.h). Plain C for every level: it runs once per
 * changed element (about 1% of a step's elements), beside the compare that reads every element;
 * in Go it took as long again as the compare. */
#include <string.h>

#include "delta.h"
#include "delta_impl.h"

#define NL_DELTA_INLINE static inline __attribute__((always_inline))

/* gap_max: the escape word M of a gap stream w bytes wide. */
NL_DELTA_INLINE uint64_t gap_max(int w) { return w == 4 ? 0xffffffffull : (1ull << (8 * w)) - 1; }

/* gaps_w writes the gap words of w bytes (little-endian) of the nnz indices at idx. At width 1
 * it also adds to wider the escape words that widths 2 and 4 would take, in the branch of a
 * gap past 254 (about one in 12 at 1% changed): the choice of width takes no pass of its own. */
NL_DELTA_INLINE uint8_t *gaps_w(uint8_t *p, const uint8_t *idx, int is, int64_t nnz, int w, uint64_t wider[2]) {
  const uint64_t m = gap_max(w);
  uint64_t next = 0; /* the index a gap of 0 stands for */
  for (int64_t k = 0; k < nnz; k++) {
    const uint64_t i = nl_delta_get_idx(idx, is, k);
    uint64_t g = i - next;
    next = i + 1;
    if (__builtin_expect(g >= m, 0)) {
      if (w == 1) {
        wider[0] += g / 65535;
        wider[1] += g / 0xffffffffull;
      }
      for (; g >= m; g -= m, p += w) memcpy(p, &m, (size_t)w);
    }
    memcpy(p, &g, (size_t)w);
    p += w;
  }
  return p;
}

NL_DELTA_INLINE uint8_t *gaps_is(uint8_t *p, const uint8_t *idx, int is, int64_t nnz, int w, uint64_t wider[2]) {
  switch (w) {
    case 1: return gaps_w(p, idx, is, nnz, 1, wider);
    case 2: return gaps_w(p, idx, is, nnz, 2, wider);
  }
  return gaps_w(p, idx, is, nnz, 4, wider);
}

static uint8_t *gaps(uint8_t *p, const uint8_t *idx, int is, int64_t nnz, int w, uint64_t wider[2]) {
  return is == 4 ? gaps_is(p, idx, 4, nnz, w, wider) : gaps_is(p, idx, 8, nnz, w, wider);
}

NL_DELTA_INLINE uint8_t *put_uvarint(uint8_t *p, uint64_t v) {
  for (; v >= 0x80; v >>= 7) *p++ = (uint8_t)(v | 0x80);
  *p++ = (uint8_t)v;
  return p;
}

/* Entries ahead whose old value the exceptions prefetch: the compare of the chunk read 2 MiB
 * through a 1 MiB L2, so the first half of the old chunk is in L3 by now. Measured on Zen 4
 * (perf, BenchmarkEncodeStep adam1%, 1 thread, two rounds each): the payload at 13-16% of the
 * compare's samples with it, 17-21% without. */
#define NL_DELTA_EX_AHEAD 32

/* exceptions_es writes, after a uvarint count, each entry whose bytes from low on differ from
 * old_bits' at its index: the uvarint of its entry number less the previous one's less 1, then
 * those bytes. The count comes first but is known last: the entries go 10 bytes (the longest
 * uvarint) further on and move back behind it. Inlined per (es, low): a compare of a constant
 * size is a move and a compare, where a call to memcmp took most of the payload's time. */
NL_DELTA_INLINE uint8_t *exceptions_es(uint8_t *p, const uint8_t *old_bits, int es, int low, const uint8_t *idx,
                                       int is, const uint8_t *vals, int64_t nnz) {
  uint8_t *const start = p + 10;
  uint8_t *q = start;
  int64_t count = 0, prev = -1;
  for (int64_t k = 0; low < es && k < nnz; k++) {
    if (k + NL_DELTA_EX_AHEAD < nnz) {
      __builtin_prefetch(old_bits + (uint64_t)es * nl_delta_get_idx(idx, is, k + NL_DELTA_EX_AHEAD));
    }
    const uint8_t *v = vals + (int64_t)es * k + low;
    const uint8_t *o = old_bits + (uint64_t)es * nl_delta_get_idx(idx, is, k) + low;
    if (memcmp(v, o, (size_t)(es - low)) != 0) {
      q = put_uvarint(q, (uint64_t)(k - prev - 1));
      memcpy(q, v, (size_t)(es - low));
      q += es - low;
      prev = k;
      count++;
    }
  }
  uint8_t *body = put_uvarint(p, (uint64_t)count);
  memmove(body, start, (size_t)(q - start));
  return body + (q - start);
}

/* exceptions_is is exceptions_es for the (es, low) pairs of a constant index size is. */
NL_DELTA_INLINE uint8_t *exceptions_is(uint8_t *p, const uint8_t *old_bits, int es, int low, const uint8_t *idx,
                                       int is, const uint8_t *vals, int64_t nnz) {
  switch (es * 8 + low) {
    case 2 * 8 + 1: return exceptions_es(p, old_bits, 2, 1, idx, is, vals, nnz);
    case 2 * 8 + 2: return exceptions_es(p, old_bits, 2, 2, idx, is, vals, nnz);
    case 4 * 8 + 1: return exceptions_es(p, old_bits, 4, 1, idx, is, vals, nnz);
    case 4 * 8 + 2: return exceptions_es(p, old_bits, 4, 2, idx, is, vals, nnz);
    case 4 * 8 + 3: return exceptions_es(p, old_bits, 4, 3, idx, is, vals, nnz);
  }
  return exceptions_es(p, old_bits, 4, 4, idx, is, vals, nnz);
}

int64_t nl_delta_packed_payload(const void *old_bits, int32_t elem_size, const void *idx,
                                 int32_t idx_size, const void *vals, int64_t nnz, int32_t width,
                                 int32_t planes, int32_t exceptions, void *out, int32_t *width_used,
                                 int64_t *gap_bytes) {
  uint8_t *const start = out;
  uint64_t wider[2] = {0, 0};
  uint8_t *p = gaps(start, idx, idx_size, nnz, width ? width : 1, wider);
  if (width == 0) { /* the shortest stream; the narrowest of equal ones */
    const uint64_t costs[3] = {(uint64_t)(p - start), 2 * ((uint64_t)nnz + wider[0]),
                               4 * ((uint64_t)nnz + wider[1])};
    int best = 0;
    for (int c = 1; c < 3; c++) {
      if (costs[c] < costs[best]) best = c;
    }
    width = 1 << best;
    if (width != 1) p = gaps(start, idx, idx_size, nnz, width, wider);
  }
  *width_used = width;
  *gap_bytes = p - start;
  const uint8_t *v = vals;
  for (int b = 0; b < planes; b++) {
    if (elem_size == 2) {
      for (int64_t k = 0; k < nnz; k++) p[k] = v[2 * k + b];
    } else {
      for (int64_t k = 0; k < nnz; k++) p[k] = v[4 * k + b];
    }
    p += nnz;
  }
  if (exceptions) {
    p = idx_size == 4 ? exceptions_is(p, old_bits, elem_size, planes, idx, 4, v, nnz)
                      : exceptions_is(p, old_bits, elem_size, planes, idx, 8, v, nnz);
  }
  return p - start;
}
