// The SIMD row kernels against the scalar reference (the oracle, as in fuzz_test.go) on rows
// whose lengths straddle the kernels' steps (4 * VW elements) and whose values force their edge
// paths: -inf lanes, +inf, NaN, a max that rises every step, ranges where exp underflows, random
// bit patterns; every dtype, two temperatures, one call per row and a row split over two calls.
// The 16-lane kernel built for AVX2 (lanes16) is tested on every machine, and where the CPU has
// AVX-512 it must give the AVX-512 kernel's outputs bit for bit. Exit status 0 when all pass.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../logprob.h"

void nl_stats_lanes16(const void* row, int32_t dtype, int64_t len, float inv_t, nl_stats* st);

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {  // xorshift64
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}
static double uniform(void) { return (double)(next() >> 11) / 9007199254740992.0; }
static float normal(void) { return (float)(sqrt(-2 * log(uniform() + 1e-300)) * cos(6.283185307179586 * uniform())); }

// A row's outputs as nl_finish_row writes them: logprob of its label, entropy, lse.
typedef struct {
  float v[3];
} outputs;

static outputs run(stats_fn f, const void* row, int32_t dtype, int64_t len, float temp, int64_t split) {
  const size_t es = dtype == NL_F32 ? 4 : 2;
  const float inv_t = 1.0f / temp;
  nl_stats st = NL_STATS_EMPTY;
  f(row, dtype, split, inv_t, &st);
  f((const char*)row + split * es, dtype, len - split, inv_t, &st);
  const int64_t label = len / 2;
  outputs o;
  nl_logprob_args a = {.n = 1, .v = len, .labels = &label, .temperature = temp, .ignore_index = -100,
                       .out_logprob = &o.v[0], .out_entropy = &o.v[1], .out_lse = &o.v[2]};
  nl_finish_row(&a, 0, st, nl_load(row, dtype, label) * inv_t);
  return o;
}

// close as in logprob_test.go: 1e-5 relative (absolute below magnitude 1), NaN for NaN, equal
// infinities.
static int close(float got, float want) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs((double)got - want) <= 1e-5 * fmax(1, fabs(want));
}

// same: equal bits, any NaN for any NaN (the kernels do not define NaN payloads).
static int same(float a, float b) { return (isnan(a) && isnan(b)) || memcmp(&a, &b, 4) == 0; }

static int failures;

enum { FILL_NORMAL, FILL_WIDE, FILL_RISING, FILL_NEG_INF, FILL_POS_INF, FILL_NAN, FILL_BITS, FILLS };
static const char* fill_names[FILLS] = {"normal", "wide", "rising", "neg-inf", "pos-inf", "nan", "bits"};

static float value(int fill, int64_t i, int64_t len) {
  switch (fill) {
    case FILL_WIDE: return normal() * 60;  // steps apart by more than exp's range
    case FILL_RISING: return (float)i * 0.05f + normal();
    case FILL_NEG_INF: return i % 3 == 0 || i < len / 4 ? -INFINITY : normal() * 3;
    case FILL_POS_INF: return i == len - 1 - len / 3 ? INFINITY : normal() * 3;
    case FILL_NAN: return i == len / 3 ? NAN : normal() * 3;
    case FILL_BITS: {
      const uint32_t b = (uint32_t)next();
      float f;
      memcpy(&f, &b, 4);
      return f;
    }
  }
  return normal() * 3;
}

int main(void) {
  const struct {
    const char* name;
    stats_fn f;
    int32_t level;
  } kernels[] = {{"avx2", nl_stats_avx2, NL_LEVEL_AVX2},
                 {"lanes16", nl_stats_lanes16, NL_LEVEL_AVX2},
                 {"avx512", nl_stats_avx512, NL_LEVEL_AVX512}};
  const int nk = sizeof kernels / sizeof kernels[0];
  const int32_t have = nl_cpu_supported();
  for (int k = 0; k < nk; k++)
    if (kernels[k].level > have)
      printf("logprob: %s skipped: this CPU's best level is %s\n", kernels[k].name, nl_cpu_level_name(have));
  const int64_t lens[] = {1, 2, 31, 32, 33, 63, 64, 65, 127, 128, 129, 191, 192, 255, 256, 257, 1000, 4099};
  const float temps[] = {1.0f, 0.7f};
  float* f32 = malloc(4099 * 4);
  uint16_t *f16 = malloc(4099 * 2), *bf16 = malloc(4099 * 2);
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    const int64_t len = lens[li];
    for (int fill = 0; fill < FILLS; fill++) {
      for (int64_t i = 0; i < len; i++) {
        f32[i] = value(fill, i, len);
        uint32_t b;
        memcpy(&b, &f32[i], 4);
        bf16[i] = (uint16_t)(b >> 16), f16[i] = nl_float_to_half(f32[i]);
      }
      const void* rows[3] = {[NL_F32] = f32, [NL_F16] = f16, [NL_BF16] = bf16};
      for (int32_t dtype = 0; dtype < 3; dtype++)
        for (int ti = 0; ti < 2; ti++)
          for (int64_t split = 0; split < len; split += len / 2 + 1) {
            const outputs want = run(nl_stats_ref, rows[dtype], dtype, len, temps[ti], split);
            outputs got[3];
            for (int k = 0; k < nk; k++) {
              if (kernels[k].level > have) continue;
              got[k] = run(kernels[k].f, rows[dtype], dtype, len, temps[ti], split);
              for (int j = 0; j < 3; j++)
                if (!close(got[k].v[j], want.v[j]) && failures++ < 20)
                  fprintf(stderr, "%s dtype %d len %lld %s T=%g split %lld: output %d = %.9g, reference %.9g\n",
                          kernels[k].name, dtype, (long long)len, fill_names[fill], temps[ti], (long long)split, j,
                          got[k].v[j], want.v[j]);
            }
            if (have >= NL_LEVEL_AVX512)
              for (int j = 0; j < 3; j++)
                if (!same(got[1].v[j], got[2].v[j]) && failures++ < 20)
                  fprintf(stderr, "lanes16 and avx512 differ: dtype %d len %lld %s T=%g split %lld: output %d = %.9g, %.9g\n",
                          dtype, (long long)len, fill_names[fill], temps[ti], (long long)split, j, got[1].v[j],
                          got[2].v[j]);
          }
    }
  }
  if (have < NL_LEVEL_AVX512) printf("logprob: lanes16 vs avx512 skipped: this CPU's best level is %s\n", nl_cpu_level_name(have));
  free(f32), free(f16), free(bf16);
  if (failures) {
    fprintf(stderr, "logprob: %d failures\n", failures);
    return 1;
  }
  printf("logprob: ok\n");
  return 0;
}
