/* The SIMD encode and check kernels against the scalar reference, including the 16-lane ones
 * built for AVX2 (lanes16), so the AVX-512 logic is tested on every machine. Encode: sizes around
 * the 64-element step, both element and index sizes, change rates from none to all, outputs
 * with room for exactly n entries followed by guard bytes (the straight appends' spare writes
 * must stay inside). Check: sorted lists with one entry broken at each position (repeated,
 * decreasing, out of range), and a tensor past 2^32 elements with 4-byte indices. Exit status 0
 * when all pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../delta.h" /* and the SIMD levels of cpu.h */
#include "../delta_impl.h"

int64_t nl_delta_encode_lanes16(const uint8_t *old_bits, const uint8_t *new_bits, int64_t n, int32_t elem_size,
                                uint64_t first, uint8_t *idx, int32_t idx_size, uint8_t *vals);
int64_t nl_delta_check_lanes16(const uint8_t *idx, int32_t idx_size, int64_t nnz, uint64_t n);

typedef int64_t (*encode_fn)(const uint8_t *, const uint8_t *, int64_t, int32_t, uint64_t, uint8_t *, int32_t,
                             uint8_t *);
typedef int64_t (*check_fn)(const uint8_t *, int32_t, int64_t, uint64_t);

static const struct {
  const char *name;
  encode_fn encode;
  check_fn check;
  int32_t level;
} kernels[] = {{"avx2", nl_delta_encode_avx2, nl_delta_check_avx2, NL_LEVEL_AVX2},
               {"lanes16", nl_delta_encode_lanes16, nl_delta_check_lanes16, NL_LEVEL_AVX2},
               {"avx512", nl_delta_encode_avx512, nl_delta_check_avx512, NL_LEVEL_AVX512}};
#define NK (int)(sizeof kernels / sizeof kernels[0])

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) { /* xorshift64 */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

static int failures;
#define FAIL(...)                       \
  do {                                  \
    if (failures++ < 20) {              \
      fprintf(stderr, __VA_ARGS__);     \
      fputc('\n', stderr);              \
    }                                   \
  } while (0)

#define GUARD 64

static void encode_case(int k, int64_t n, int es, int is, uint64_t first, int per_mille) {
  uint8_t *o = malloc((size_t)(n * es + 1)), *w = malloc((size_t)(n * es + 1));
  for (int64_t i = 0; i < n * es; i++) o[i] = (uint8_t)next();
  memcpy(w, o, (size_t)(n * es));
  for (int64_t i = 0; i < n; i++)
    if ((int)(next() % 1000) < per_mille) w[i * es + next() % es] ^= (uint8_t)(1 + next() % 255);
  uint8_t *want_idx = malloc((size_t)(n * is + 1)), *want_vals = malloc((size_t)(n * es + 1));
  uint8_t *idx = malloc((size_t)(n * is + GUARD)), *vals = malloc((size_t)(n * es + GUARD));
  memset(idx, 0xa5, (size_t)(n * is + GUARD)), memset(vals, 0xa5, (size_t)(n * es + GUARD));
  const int64_t want = nl_delta_encode_ref(o, w, n, es, first, want_idx, is, want_vals);
  const int64_t got = kernels[k].encode(o, w, n, es, first, idx, is, vals);
  if (got != want || memcmp(idx, want_idx, (size_t)(want * is)) || memcmp(vals, want_vals, (size_t)(want * es)))
    FAIL("%s encode n=%lld es=%d is=%d first=%llu %d/1000 changed: %lld entries, reference %lld (or other entries)",
         kernels[k].name, (long long)n, es, is, (unsigned long long)first, per_mille, (long long)got, (long long)want);
  for (int g = 0; g < GUARD; g++)
    if (idx[n * is + g] != 0xa5 || vals[n * es + g] != 0xa5) {
      FAIL("%s encode n=%lld es=%d is=%d: wrote past the room for n entries", kernels[k].name, (long long)n, es, is);
      break;
    }
  free(o), free(w), free(want_idx), free(want_vals), free(idx), free(vals);
}

static void put(uint8_t *idx, int is, int64_t k, uint64_t v) {
  if (is == 4) {
    const uint32_t v32 = (uint32_t)v;
    memcpy(idx + 4 * k, &v32, 4);
  } else {
    memcpy(idx + 8 * k, &v, 8);
  }
}

/* check_case: nnz increasing indices below n from base, then each entry broken in turn. */
static void check_case(int k, int64_t nnz, int is, uint64_t n, uint64_t base) {
  uint8_t *idx = malloc((size_t)(nnz * is + 1));
  uint64_t v = base;
  for (int64_t j = 0; j < nnz; j++) put(idx, is, j, v), v += 1 + next() % 3;
  for (int64_t bad = -1; bad < nnz; bad++) {
    for (int how = 0; how < 3; how++) {
      if (bad < 0 && how > 0) break;
      const uint64_t keep = nl_delta_get_idx(idx, is, bad < 0 ? 0 : bad);
      if (bad >= 0) {
        const uint64_t prev = bad > 0 ? nl_delta_get_idx(idx, is, bad - 1) : 0;
        if (how == 2 && (is == 4 && n > UINT32_MAX)) continue; /* no u32 is out of range */
        put(idx, is, bad, how == 0 ? prev : how == 1 ? prev - (bad > 0) : n);
      }
      const int64_t want = nl_delta_check_ref(idx, is, 0, nnz, n);
      const int64_t got = kernels[k].check(idx, is, nnz, n);
      if (got != want)
        FAIL("%s check nnz=%lld is=%d n=%llu, entry %lld broken (%d): %lld, reference %lld", kernels[k].name,
             (long long)nnz, is, (unsigned long long)n, (long long)bad, how, (long long)got, (long long)want);
      if (bad >= 0) put(idx, is, bad, keep);
    }
  }
  free(idx);
}

int main(void) {
  const int32_t have = nl_cpu_supported();
  const int64_t ns[] = {0, 1, 63, 64, 65, 127, 128, 129, 1000, 4099};
  const int rates[] = {0, 10, 300, 1000};
  const int64_t nnzs[] = {1, 2, 8, 9, 16, 17, 33, 70};
  for (int k = 0; k < NK; k++) {
    if (kernels[k].level > have) {
      printf("delta: %s skipped: this CPU's best level is %s\n", kernels[k].name, nl_cpu_level_name(have));
      continue;
    }
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
      for (int es = 2; es <= 4; es += 2)
        for (int is = 4; is <= 8; is += 4)
          for (size_t ri = 0; ri < sizeof rates / sizeof rates[0]; ri++)
            encode_case(k, ns[ni], es, is, is == 8 ? (1ull << 32) - 7 : 5, rates[ri]);
    for (size_t ni = 0; ni < sizeof nnzs / sizeof nnzs[0]; ni++) {
      check_case(k, nnzs[ni], 4, 1000, 0);
      check_case(k, nnzs[ni], 4, 1ull << 33, (1ull << 32) - 300); /* every u32 in range */
      check_case(k, nnzs[ni], 8, (1ull << 32) + 500, (1ull << 32) - 100);
    }
  }
  if (failures) {
    fprintf(stderr, "delta: %d failures\n", failures);
    return 1;
  }
  printf("delta: ok\n");
  return 0;
}
