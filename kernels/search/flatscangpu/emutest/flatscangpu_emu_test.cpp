// Runs the GPU flat index's kernels (flatscangpu.cu, the very source compiled to PTX) on the CPU
// through testkit/cudaemu/cudaemu.h and compares them with the scalar C reference
// (topk_ref.c) and the compiler's own fp16 conversion, on edge shapes: k = 1, k = n, k > n
// (label -1), k = 8192, ties across tiles and segments, NaN, -0, L2, n not a multiple of the
// block; and the loading kernels (fp16 rounding, norms, synthetic rows).
// A ctest test: `ctest --test-dir build/native -R flatscangpu_cuda_emu` (part of `make test`).
#include "kernels/search/flatscangpu/emutest/topk_ref.h"
#include "testkit/cudaemu/cudaemu.h"  // the host emulation the .cu runs under
#include "kernels/search/flatscangpu/flatscangpu.cu"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

enum Fill { kRandom, kTies, kNaN, kSignedZero };

struct Case {
  const char* name;
  int64_t nq, n, k, tile, segments;
  bool l2;
  Fill fill;
  unsigned block;
};

// decode is keys.go's decode: the key's score and label (-1 for key 0).
void decode(u64 key, bool l2, float* dist, int64_t* label) {
  if (key == 0) {
    *dist = l2 ? 3.40282347e38f : -3.40282347e38f;
    *label = -1;
    return;
  }
  uint32_t u = (uint32_t)(key >> 32);
  if (l2) u = ~u;
  u = (u & 0x80000000u) ? (u & 0x7fffffffu) : ~u;
  *dist = cudev_bits_to_float(u);
  *label = (int64_t)(0xffffffffu - (uint32_t)key);
}

long long pow2_at_least(long long k) {
  long long w = 1;
  while (w < k) w *= 2;
  return w;
}

// run_case returns the number of mismatching hits.
int run_case(const Case& c, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> scores(c.nq * c.n), xnorm(c.n), qnorm(c.nq);
  for (int64_t i = 0; i < c.nq * c.n; i++) {
    int64_t q = i / c.n;
    switch (c.fill) {
      case kRandom: scores[i] = normal(rng); break;
      case kTies: scores[i] = 0.5f * (float)(rng() % 4); break;
      case kNaN: scores[i] = (q == 2 || rng() % 10 == 0) ? NAN : normal(rng); break;
      case kSignedZero: {
        static const float v[4] = {-0.0f, 0.0f, -1.0f, 1.0f};
        scores[i] = v[rng() % 4];
        break;
      }
    }
  }
  for (auto& x : xnorm) x = c.fill == kTies ? 1.0f : 1.0f + std::fabs(normal(rng));
  for (auto& x : qnorm) x = 1.0f + std::fabs(normal(rng));
  const float* xn = c.l2 ? xnorm.data() : nullptr;
  const float* qn = c.l2 ? qnorm.data() : nullptr;

  std::vector<float> want_d(c.nq * c.k);
  std::vector<int64_t> want_l(c.nq * c.k);
  nl_topk_ref(scores.data(), c.nq, c.n, c.n, xn, qn, c.k, want_d.data(), want_l.data());

  long long width = pow2_at_least(c.k);
  std::vector<u64> a(c.nq * width, 12345), b(c.nq * width, 12345), segs(c.nq * c.segments * width, 12345);
  u64 *prev = nullptr, *out = a.data();
  for (int64_t t = 0; t < c.n; t += c.tile) {
    long long nt = std::min(c.tile, c.n - t), seglen = (nt + c.segments - 1) / c.segments;
    cuemu::launch(dim3((unsigned)c.nq, (unsigned)c.segments), dim3(c.block), nl_topk_tile,
                  (const float*)scores.data() + t, (long long)c.n, nt, seglen, (long long)t,
                  c.l2 ? (const float*)xnorm.data() + t : (const float*)nullptr, qn, (const u64*)prev,
                  (int)c.k, c.segments > 1 ? segs.data() : out, width);
    if (c.segments > 1) {
      cuemu::launch(dim3((unsigned)c.nq), dim3(c.block), nl_topk_merge, (const u64*)segs.data(),
                    (long long)(c.segments * width), (int)c.k, out, width);
    }
    prev = out;
    out = out == a.data() ? b.data() : a.data();
  }
  cuemu::launch(dim3((unsigned)c.nq), dim3(c.block), nl_topk_sort, prev, width);

  int bad = 0;
  for (int64_t q = 0; q < c.nq; q++) {
    for (int64_t j = 0; j < c.k; j++) {
      float d;
      int64_t l;
      decode(prev[q * width + j], c.l2, &d, &l);
      float wd = want_d[q * c.k + j];
      int64_t wl = want_l[q * c.k + j];
      if ((d != wd || l != wl) && bad++ < 5) {
        std::printf("FAIL %s: query %lld hit %lld = (%.9g, %lld), reference (%.9g, %lld)\n", c.name,
                    (long long)q, (long long)j, d, (long long)l, wd, (long long)wl);
      }
    }
    for (long long j = c.k; j < width; j++) {
      if (prev[q * width + j] != 0 && bad++ < 5) std::printf("FAIL %s: padding slot %lld not 0\n", c.name, j);
    }
  }
  return bad;
}

// check_f16 compares nl_float_to_half with the compiler's float -> _Float16 (round to nearest
// even) over a sweep of every exponent and sign and many mantissas.
int check_f16() {
  int bad = 0;
  for (uint64_t x = 0; x <= 0xffffffffull; x += 4099) {
    for (uint32_t low : {0u, 1u, 0xfffu, 0x1000u, 0x1001u, 0x3000u}) {
      uint32_t bits = ((uint32_t)x & ~0x1fffu) | low;
      float f = cudev_bits_to_float(bits);
      _Float16 h = (_Float16)f;
      uint16_t want;
      std::memcpy(&want, &h, 2);
      uint16_t got = nl_float_to_half(f);
      bool both_nan = std::isnan(f) && (got & 0x7c00) == 0x7c00 && (got & 0x3ff);
      if (got != want && !both_nan && bad++ < 5) {
        std::printf("FAIL f16: %#010x (%.9g) -> %#06x, compiler %#06x\n", bits, f, got, want);
      }
    }
  }
  return bad;
}

// check_prepare runs nl_rows_prepare on rows of a dimension that is not a multiple of the
// block: fp16 bits as the compiler rounds, norms of the rounded values (and of fp32 rows).
int check_prepare(std::mt19937& rng) {
  const int64_t rows = 5, dim = 301;
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> src(rows * dim), norms16(rows), norms32(rows);
  for (auto& v : src) v = normal(rng);
  std::vector<uint16_t> dst(rows * dim);
  cuemu::launch(dim3(rows), dim3(96), nl_rows_prepare, (const float*)src.data(), dim, dst.data(), norms16.data());
  cuemu::launch(dim3(rows), dim3(64), nl_rows_prepare, (const float*)src.data(), dim, (uint16_t*)nullptr, norms32.data());
  int bad = 0;
  for (int64_t r = 0; r < rows; r++) {
    double want16 = 0, want32 = 0;
    for (int64_t j = 0; j < dim; j++) {
      _Float16 h = (_Float16)src[r * dim + j];
      uint16_t hb;
      std::memcpy(&hb, &h, 2);
      if (dst[r * dim + j] != hb && bad++ < 5) std::printf("FAIL prepare: row %lld col %lld fp16 bits\n", (long long)r, (long long)j);
      want16 += (double)(float)h * (float)h;
      want32 += (double)src[r * dim + j] * src[r * dim + j];
    }
    if (std::fabs(norms16[r] - want16) > 1e-5 * want16 && bad++ < 5) std::printf("FAIL prepare: row %lld fp16 norm %.9g, want %.9g\n", (long long)r, norms16[r], want16);
    if (std::fabs(norms32[r] - want32) > 1e-5 * want32 && bad++ < 5) std::printf("FAIL prepare: row %lld fp32 norm %.9g, want %.9g\n", (long long)r, norms32[r], want32);
  }
  return bad;
}

// check_random: nl_rows_random's values depend on (seed, index) only (a launch from row 5
// writes what rows 5.. of a launch from row 0 hold), lie in [-1, 1), its fp16 rows are its fp32
// rows rounded, and its norms are those of the stored values.
int check_random() {
  const long long rows = 10, dim = 77;
  const u64 seed = 42;
  std::vector<float> all(rows * dim), tail(5 * dim), norms(rows);
  std::vector<uint16_t> half(rows * dim);
  cuemu::launch(dim3(rows), dim3(64), nl_rows_random, seed, 0LL, dim, (uint16_t*)nullptr, all.data(), norms.data());
  cuemu::launch(dim3(5), dim3(32), nl_rows_random, seed, 5LL, dim, (uint16_t*)nullptr, tail.data(), (float*)nullptr);
  cuemu::launch(dim3(rows), dim3(96), nl_rows_random, seed, 0LL, dim, half.data(), (float*)nullptr, (float*)nullptr);
  int bad = 0;
  for (long long i = 0; i < rows * dim; i++) {
    if ((all[i] < -1.0f || all[i] >= 1.0f) && bad++ < 5) std::printf("FAIL random: value %lld = %g\n", i, all[i]);
    if (i >= 5 * dim && tail[i - 5 * dim] != all[i] && bad++ < 5) std::printf("FAIL random: value %lld depends on row0\n", i);
    if (half[i] != nl_float_to_half(all[i]) && bad++ < 5) std::printf("FAIL random: fp16 value %lld\n", i);
  }
  for (long long r = 0; r < rows; r++) {
    double want = 0;
    for (long long j = 0; j < dim; j++) want += (double)all[r * dim + j] * all[r * dim + j];
    if (std::fabs(norms[r] - want) > 1e-5 * want && bad++ < 5) std::printf("FAIL random: norm %lld\n", r);
  }
  u64 words[1000], out = 7;
  for (u64 i = 0; i < 1000; i++) words[i] = i * 0x9e3779b97f4a7c15ull;
  cuemu::launch(dim3(3), dim3(64), nl_read, (const u64*)words, 1000LL, &out);
  if (out != 7 && bad++ < 5) std::printf("FAIL read: wrote its output\n");
  return bad;
}

}  // namespace

int main() {
  const Case cases[] = {
      {"k=1", 3, 1000, 1, 1000, 1, false, kRandom, 64},
      {"k=n", 2, 300, 300, 300, 1, false, kRandom, 128},
      {"k>n: label -1", 3, 37, 50, 37, 1, false, kRandom, 32},
      {"k>n over tiles and segments, L2", 2, 37, 50, 16, 3, true, kRandom, 32},
      {"n not a multiple of the block", 4, 1001, 17, 1001, 1, false, kRandom, 96},
      {"many tiles, k=10", 3, 5000, 10, 500, 1, false, kRandom, 64},
      {"more valid keys than shared memory holds", 2, 10000, 10, 10000, 1, false, kRandom, 128},
      {"ties across tiles", 3, 5000, 100, 1024, 1, false, kTies, 128},
      {"ties across tiles and segments", 2, 5000, 100, 2000, 7, false, kTies, 64},
      {"NaN, an all-NaN query", 4, 777, 20, 300, 1, false, kNaN, 64},
      {"NaN in segments", 3, 777, 20, 777, 5, false, kNaN, 64},
      {"-0 and +0 tie", 3, 400, 150, 128, 1, false, kSignedZero, 64},
      {"L2 with ties", 3, 3000, 64, 1000, 1, true, kTies, 128},
      {"L2 random in segments", 2, 2500, 10, 2500, 4, true, kRandom, 256},
      {"k=8192 over three tiles", 2, 20000, 8192, 8192, 1, false, kRandom, 256},
      {"k=8192, one query in 3 segments", 1, 30000, 8192, 30000, 3, false, kRandom, 256},
  };
  std::mt19937 rng(11);
  int failed = 0;
  for (const Case& c : cases) {
    int bad = run_case(c, rng);
    std::printf("%s %s (nq=%lld n=%lld k=%lld tile=%lld segments=%lld block=%u)\n", bad ? "FAIL" : "ok  ",
                c.name, (long long)c.nq, (long long)c.n, (long long)c.k, (long long)c.tile,
                (long long)c.segments, c.block);
    failed += bad != 0;
  }
  int bad = check_f16();
  std::printf("%s fp32 -> fp16 rounding\n", bad ? "FAIL" : "ok  ");
  failed += bad != 0;
  bad = check_prepare(rng);
  std::printf("%s rows prepare (fp16 rows, norms)\n", bad ? "FAIL" : "ok  ");
  failed += bad != 0;
  bad = check_random();
  std::printf("%s synthetic rows, read yardstick\n", bad ? "FAIL" : "ok  ");
  failed += bad != 0;
  return failed ? 1 : 0;
}
