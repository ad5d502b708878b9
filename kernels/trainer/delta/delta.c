/* Argument checks, level dispatch and error messages for the delta kernels (delta.h). */
#include "delta.h"

#include <immintrin.h>
#include <stdarg.h>
#include <stdio.h>

#include "delta_impl.h"

static void set_err(char *err, int64_t errlen, const char *fmt, ...) {
  if (err == NULL || errlen <= 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, (size_t)errlen, fmt, ap);
  va_end(ap);
}

static int sizes_ok(int32_t elem_size, int32_t idx_size, char *err, int64_t errlen) {
  if (elem_size != 2 && elem_size != 4) {
    set_err(err, errlen, "element size %d is not 2 (bf16/fp16) or 4 (fp32)", elem_size);
    return 0;
  }
  if (idx_size != 4 && idx_size != 8) {
    set_err(err, errlen, "index size %d is not 4 or 8", idx_size);
    return 0;
  }
  return 1;
}

int64_t nl_delta_encode(int32_t level, const void *old_bits, const void *new_bits,
                            int64_t n, int32_t elem_size, uint64_t first, void *idx,
                            int32_t idx_size, void *vals, char *err, int64_t errlen) {
  if (!sizes_ok(elem_size, idx_size, err, errlen)) return -1;
  if (n < 0) {
    set_err(err, errlen, "negative element count %lld", (long long)n);
    return -1;
  }
  if (idx_size == 4 && n > 0 && first + (uint64_t)n - 1 > UINT32_MAX) {
    set_err(err, errlen, "index %llu does not fit a 4-byte index",
            (unsigned long long)(first + (uint64_t)n - 1));
    return -1;
  }
  const uint8_t *o = old_bits, *w = new_bits;
  switch (nl_cpu_at_most(level, NL_LEVEL_AVX512)) {
    case NL_LEVEL_REF:
      return nl_delta_encode_ref(o, w, n, elem_size, first, idx, idx_size, vals);
    case NL_LEVEL_AVX2:
      return nl_delta_encode_avx2(o, w, n, elem_size, first, idx, idx_size, vals);
    case NL_LEVEL_AVX512:
      return nl_delta_encode_avx512(o, w, n, elem_size, first, idx, idx_size, vals);
  }
  set_err(err, errlen, "unknown SIMD level %d", level);
  return -1;
}

int32_t nl_delta_check(int32_t level, const void *idx, int32_t idx_size, int64_t nnz,
                           uint64_t n, char *err, int64_t errlen) {
  if (!sizes_ok(2, idx_size, err, errlen)) return -1;
  if (nnz < 0 || (uint64_t)nnz > n) {
    set_err(err, errlen, "%lld changed entries for a tensor of %llu elements", (long long)nnz,
            (unsigned long long)n);
    return -1;
  }
  int64_t bad;
  switch (nl_cpu_at_most(level, NL_LEVEL_AVX512)) {
    case NL_LEVEL_REF: bad = nl_delta_check_ref(idx, idx_size, 0, nnz, n); break;
    case NL_LEVEL_AVX2: bad = nl_delta_check_avx2(idx, idx_size, nnz, n); break;
    case NL_LEVEL_AVX512: bad = nl_delta_check_avx512(idx, idx_size, nnz, n); break;
    default: set_err(err, errlen, "unknown SIMD level %d", level); return -1;
  }
  if (bad == nnz) return 0;
  uint64_t g = nl_delta_get_idx(idx, idx_size, bad);
  if (g >= n) {
    set_err(err, errlen, "entry %lld: index %llu out of range for %llu elements", (long long)bad,
            (unsigned long long)g, (unsigned long long)n);
  } else {
    set_err(err, errlen, "entry %lld: index %llu not greater than the previous index %llu",
            (long long)bad, (unsigned long long)g,
            (unsigned long long)nl_delta_get_idx(idx, idx_size, bad - 1));
  }
  return -1;
}

/* Entries ahead whose target line is prefetched into L2 (prefetcht1): the targets are scattered,
 * so every write misses cache, and a scatter runs as fast as the core keeps misses in flight.
 * Measured on Zen 4 (AVX-512 EPYC, bf16, 256 MiB, 1 thread, CPU time): prefetchnta 16 entries
 * ahead took 5.3 / 10.1 / 14.0 ms at 0.5 / 1 / 2% changed, prefetcht1 or t2 256-512 ahead
 * 3.2 / 6.7 / 9.6-10.4 ms; prefetchw or prefetcht0 (into L1) gained nothing over nta16, no
 * prefetch was as fast as nta16, and prefetching every line ahead (to feed the hardware
 * streamer) took 16 ms at 2%. On Zen 3 (1 GiB) nta16 had cut ~70 to ~50 ms at 1% and ~100 to
 * ~87 ms at 2% against no prefetch; t1 256 ahead has not run there. */
#define NL_DELTA_PREFETCH 256

/* scatter_es is nl_delta_scatter for a constant element size es writing the first nb bytes of
 * each value (inlined per pair). */
static inline __attribute__((always_inline)) void scatter_es(uint8_t *b, int32_t es, int32_t nb,
                                                             const uint8_t *ix, int32_t idx_size,
                                                             const uint8_t *v, int64_t nnz) {
  int64_t k = 0;
  for (; k + NL_DELTA_PREFETCH < nnz; k++) {
    _mm_prefetch((const char *)b + es * nl_delta_get_idx(ix, idx_size, k + NL_DELTA_PREFETCH),
                 _MM_HINT_T1);
    memcpy(b + es * nl_delta_get_idx(ix, idx_size, k), v + es * k, (size_t)nb);
  }
  for (; k < nnz; k++) memcpy(b + es * nl_delta_get_idx(ix, idx_size, k), v + es * k, (size_t)nb);
}

/* Scalar for every level: AVX-512 has no 16-bit scatter, and the misses on scattered cache
 * lines, not the instructions, bound the speed (above). */
void nl_delta_scatter(void *base, int32_t elem_size, int32_t write_bytes, const void *idx,
                      int32_t idx_size, const void *vals, int64_t nnz) {
  if (elem_size == 2) {
    if (write_bytes == 1) {
      scatter_es(base, 2, 1, idx, idx_size, vals, nnz);
    } else {
      scatter_es(base, 2, 2, idx, idx_size, vals, nnz);
    }
  } else if (write_bytes == 2) {
    scatter_es(base, 4, 2, idx, idx_size, vals, nnz);
  } else {
    scatter_es(base, 4, 4, idx, idx_size, vals, nnz);
  }
}

int32_t nl_delta_apply(int32_t level, void *base, int64_t n, int32_t elem_size,
                           const void *idx, int32_t idx_size, const void *vals, int64_t nnz,
                           char *err, int64_t errlen) {
  if (!sizes_ok(elem_size, idx_size, err, errlen)) return -1;
  if (n < 0) {
    set_err(err, errlen, "negative element count %lld", (long long)n);
    return -1;
  }
  if (nl_delta_check(level, idx, idx_size, nnz, (uint64_t)n, err, errlen) != 0) return -1;
  nl_delta_scatter(base, elem_size, elem_size, idx, idx_size, vals, nnz);
  return 0;
}
