// Runs the CUDA logprob kernel (logprob.cu, the very source compiled to PTX) on the CPU through
// testkit/cudaemu/cudaemu.h and compares it with the scalar C reference on small and edge shapes.
// A ctest test: `ctest --test-dir build/native -R logprob_cuda_emu` (part of `make test`).
extern "C" {
#include "kernels/trainer/logprob/logprob.h"
}
#include "testkit/cudaemu/cudaemu.h"  // the host emulation the .cu runs under
#include "kernels/trainer/logprob/logprob.cu"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

enum Fill { kRandom, kAllEqual, kNegInf, kNaNRow, kPosInfRow };

struct Case {
  const char* name;
  int64_t n, v;
  int dtype;
  float temperature;
  Fill fill;
  unsigned block;
};

uint16_t to_bits16(float f, int dtype) {
  uint16_t out;
  if (dtype == NL_F16) {
    _Float16 h = (_Float16)f;
    std::memcpy(&out, &h, 2);
  } else {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    out = (uint16_t)(u >> 16);
  }
  return out;
}

bool close_enough(float got, float want) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= 1e-5f * std::fmax(1.0f, std::fabs(want));
}

// run_case returns the number of mismatching outputs.
int run_case(const Case& c, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> vals(c.n * c.v);
  for (int64_t i = 0; i < c.n * c.v; i++) {
    int64_t row = i / c.v, col = i % c.v;
    switch (c.fill) {
      case kRandom: vals[i] = normal(rng); break;
      case kAllEqual: vals[i] = 0.75f; break;
      case kNegInf: vals[i] = col % 3 == 0 ? -INFINITY : normal(rng); break;
      case kNaNRow: vals[i] = (row == 1 && col == c.v / 2) ? NAN : normal(rng); break;
      case kPosInfRow: vals[i] = (row == 2 && col == c.v / 3) ? INFINITY : normal(rng); break;
    }
  }
  std::vector<uint16_t> half(vals.size());
  for (size_t i = 0; i < vals.size(); i++) half[i] = to_bits16(vals[i], c.dtype);
  const void* logits = c.dtype == NL_F32 ? (const void*)vals.data() : (const void*)half.data();
  std::vector<int64_t> labels(c.n);
  for (int64_t i = 0; i < c.n; i++) labels[i] = i % 4 == 3 ? -100 : (int64_t)(rng() % c.v);
  if (c.fill == kNegInf && c.n > 0) labels[0] = 0;  // a label on a -inf entry

  std::vector<float> want(3 * c.n), got(3 * c.n, 12345.0f);
  nl_logprob_args a = {logits, c.dtype, c.n, c.v, labels.data(), c.temperature, -100,
                       want.data(), want.data() + c.n, want.data() + 2 * c.n};
  char err[256];
  if (nl_logprob_run(&a, NL_LEVEL_REF, 1, err, sizeof err) != 0) {
    std::printf("FAIL %s: reference: %s\n", c.name, err);
    return 1;
  }
  auto kernel = c.dtype == NL_BF16 ? nl_cuda_logprob_bf16
                : c.dtype == NL_F16 ? nl_cuda_logprob_f16
                                    : nl_cuda_logprob_f32;
  cuemu::launch(dim3((unsigned)c.n), dim3(c.block), kernel, logits, (long long)c.v,
                (const long long*)labels.data(), 1.0f / c.temperature, -100LL, got.data(),
                got.data() + c.n, got.data() + 2 * c.n);
  if (c.n == 0) return 0;
  int bad = 0;
  static const char* what[3] = {"logprob", "entropy", "lse"};
  for (int k = 0; k < 3; k++) {
    for (int64_t i = 0; i < c.n; i++) {
      float g = got[k * c.n + i], w = want[k * c.n + i];
      if (!close_enough(g, w) && bad++ < 5) {
        std::printf("FAIL %s: row %lld %s = %.9g, reference %.9g\n", c.name, (long long)i, what[k],
                    g, w);
      }
    }
  }
  return bad;
}

// bad_labels: a label outside [0, v) gives NaN for its row only, and is never read.
int bad_labels() {
  const int64_t n = 4, v = 5;
  std::vector<float> logits(n * v, 1.0f);
  std::vector<int64_t> labels = {-1, 5, 1LL << 40, 2};
  std::vector<float> lp(n, 12345.0f);
  cuemu::launch(dim3((unsigned)n), dim3(32), nl_cuda_logprob_f32, (const void*)logits.data(),
                (long long)v, (const long long*)labels.data(), 1.0f, -100LL, lp.data(),
                (float*)nullptr, (float*)nullptr);
  int bad = 0;
  for (int64_t i = 0; i < 3; i++) bad += !std::isnan(lp[i]);
  bad += !close_enough(lp[3], -std::log(5.0f));
  std::printf("%s bad labels (logprob %g %g %g %g)\n", bad ? "FAIL" : "ok  ", lp[0], lp[1], lp[2], lp[3]);
  return bad;
}

}  // namespace

int main() {
  const Case cases[] = {
      {"empty", 0, 9, NL_BF16, 1.0f, kRandom, 64},
      {"one-by-one", 1, 1, NL_F32, 1.0f, kRandom, 32},
      {"odd bf16", 3, 17, NL_BF16, 1.0f, kRandom, 64},
      {"three warps", 5, 1001, NL_F16, 0.7f, kRandom, 96},
      {"block 256", 4, 4099, NL_BF16, 1.3f, kRandom, 256},
      {"all-equal", 3, 500, NL_F32, 1.0f, kAllEqual, 128},
      {"neg-inf", 4, 300, NL_BF16, 1.0f, kNegInf, 64},
      {"nan row", 3, 200, NL_F16, 1.0f, kNaNRow, 64},
      {"+inf row", 4, 300, NL_F32, 1.0f, kPosInfRow, 64},
      {"qwen-7b vocab", 2, 152064, NL_BF16, 1.0f, kRandom, 256},
  };
  std::mt19937 rng(7);
  int failed = 0;
  for (const Case& c : cases) {
    int bad = run_case(c, rng);
    std::printf("%s %s (n=%lld v=%lld block=%u)\n", bad ? "FAIL" : "ok  ", c.name, (long long)c.n,
                (long long)c.v, c.block);
    failed += bad != 0;
  }
  failed += bad_labels() != 0;
  return failed ? 1 : 0;
}
