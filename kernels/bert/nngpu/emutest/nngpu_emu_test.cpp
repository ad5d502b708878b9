// Runs the GPU encoder's kernels (nngpu.cu, the very source compiled to PTX) on the CPU through
// testkit/cudaemu/cudaemu.h and compares them with the scalar reference ops of the CPU
// encoder (nn_ops_ref of kernels/bert/nn/nn_ref.c) on edge shapes: widths not a multiple of
// the block and up to NG_MAX_HIDDEN, sequences of length 0, 1, odd, one chunk plus one, up to
// 512, head dims 32 and 64, mean and CLS pooling with and without normalization.
// fp16 outputs must be within one fp16 step of the reference; fp32 outputs within 2e-5 relative.
// A ctest test: `ctest --test-dir build/native -R nngpu_cuda_emu` (part of `make test`).
extern "C" {
#include "kernels/bert/nn/nn.h"
}
#include "testkit/cudaemu/cudaemu.h"  // the host emulation the .cu runs under
#include "kernels/bert/nngpu/nngpu.cu"

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace {

std::mt19937 rng(7);
int failures = 0;

std::vector<float> normal(size_t n, float sd) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

float half_value(uint16_t h) { return (float)__builtin_bit_cast(_Float16, h); }

// close32 checks an fp32 output; close16 an fp16 output against the fp32 reference (one fp16
// step of the value, plus tol for the reordered fp32 sums before rounding).
bool close32(float got, float want) { return std::fabs(got - want) <= 2e-5f * (1.0f + std::fabs(want)); }
bool close16(uint16_t got, float want, float tol) {
  return std::fabs(half_value(got) - want) <= std::ldexp(1.0f, std::ilogb(std::fabs(want) + 1e-30f) - 10) + tol;
}

void expect(bool ok, const char* what, long long i, float got, float want) {
  if (!ok && failures++ < 20) std::printf("FAIL %s [%lld]: got %.8g want %.8g\n", what, i, got, want);
}

// check_rows compares x (fp32) and xh (fp16 of x) with the reference rows.
void check_rows(const char* what, const std::vector<float>& x, const std::vector<uint16_t>& xh,
                const std::vector<float>& want) {
  for (size_t i = 0; i < want.size(); i++) {
    expect(close32(x[i], want[i]), what, (long long)i, x[i], want[i]);
    expect(xh[i] == cudev_f2h_rn(x[i]), what, (long long)i, half_value(xh[i]), x[i]);
  }
}

void test_layernorms(int n, int T) {
  const int vocab = 50, positions = 40;
  const float eps = 1e-12f;
  auto word = normal(vocab * n, 1), pos = normal(positions * n, 1), type0 = normal(n, 1);
  auto gamma = normal(n, 1), beta = normal(n, 1), y = normal(T * n, 3), bias = normal(n, 1);
  std::vector<int32_t> ids(T), pids(T);
  for (int t = 0; t < T; t++) ids[t] = (int32_t)(rng() % vocab), pids[t] = (int32_t)(rng() % positions);
  std::vector<float> x(T * n), want(T * n);
  std::vector<uint16_t> xh(T * n);
  cuemu::launch(dim3(T), dim3(NG_BLOCK), ng_embed_layernorm, x.data(), xh.data(), (const int32_t*)ids.data(),
                (const int32_t*)pids.data(), (const float*)word.data(), (const float*)pos.data(),
                (const float*)type0.data(), (const float*)gamma.data(), (const float*)beta.data(), n, eps);
  for (int t = 0; t < T; t++)
    nn_ops_ref.add_layernorm(&want[t * n], &word[ids[t] * n], type0.data(), &pos[pids[t] * n], gamma.data(),
                             beta.data(), n, eps);
  check_rows("embed_layernorm", x, xh, want);
  // x = LN(y + bias + x), from the embeddings just checked.
  std::vector<float> res = x;
  cuemu::launch(dim3(T), dim3(NG_BLOCK), ng_add_layernorm, x.data(), xh.data(), (const float*)y.data(),
                (const float*)bias.data(), (const float*)gamma.data(), (const float*)beta.data(), n, 1e-5f);
  for (int t = 0; t < T; t++)
    nn_ops_ref.add_layernorm(&want[t * n], &y[t * n], bias.data(), &res[t * n], gamma.data(), beta.data(), n, 1e-5f);
  check_rows("add_layernorm", x, xh, want);
}

void test_gelu(long long rows, int n, unsigned grid) {
  auto y = normal(rows * n, 3), bias = normal(n, 1);
  y[0] = -12.0f, y[1] = 12.0f, y[2] = 0.0f;  // saturated tails and the center
  std::vector<uint16_t> out(rows * n);
  cuemu::launch(dim3(grid), dim3(NG_BLOCK), ng_bias_gelu, out.data(), (const float*)y.data(),
                (const float*)bias.data(), rows, n);
  for (long long r = 0; r < rows; r++) {
    std::vector<float> want(y.begin() + r * n, y.begin() + (r + 1) * n);
    nn_ops_ref.bias_act(want.data(), bias.data(), n, NN_ACT_GELU);
    for (int c = 0; c < n; c++)
      expect(close16(out[r * n + c], want[c], 2e-7f), "bias_gelu", r * n + c, half_value(out[r * n + c]), want[c]);
  }
}

template <int HD>
void test_attention(const std::vector<int32_t>& lens, int heads, float sd) {
  std::vector<int32_t> start{0};
  int maxL = 0;
  for (int L : lens) start.push_back(start.back() + L), maxL = std::max(maxL, L);
  const int T = start.back(), H = heads * HD, nseq = (int)lens.size();
  auto qkv = normal((size_t)T * 3 * H, sd), bias = normal(3 * H, 0.3f);
  std::vector<uint16_t> ctx(T * H, 0xffff);
  auto kernel = HD == 32 ? ng_attention_hd32 : ng_attention_hd64;
  cuemu::launch(dim3(nseq, heads, (maxL + NG_ATT_QUERIES - 1) / NG_ATT_QUERIES), dim3(NG_ATT_QUERIES), kernel,
                ctx.data(), (const float*)qkv.data(), (const float*)bias.data(), (const int32_t*)start.data(), heads);
  // The reference: scores of the biased q and k, nn_ref's softmax, then the weighted sum of v.
  auto at = [&](int t, int part, int h, int d) { return qkv[(size_t)t * 3 * H + part * H + h * HD + d] + bias[part * H + h * HD + d]; };
  for (int s = 0; s < nseq; s++)
    for (int h = 0; h < heads; h++)
      for (int i = start[s]; i < start[s + 1]; i++) {
        std::vector<float> S(lens[s]);
        for (int j = 0; j < lens[s]; j++) {
          float dot = 0;
          for (int d = 0; d < HD; d++) dot += at(i, 0, h, d) * at(start[s] + j, 1, h, d);
          S[j] = dot;
        }
        nn_ops_ref.softmax(S.data(), lens[s], lens[s], 1.0f / std::sqrt((float)HD));
        for (int d = 0; d < HD; d++) {
          double want = 0;
          for (int j = 0; j < lens[s]; j++) want += (double)S[j] * at(start[s] + j, 2, h, d);
          size_t k = (size_t)i * H + h * HD + d;
          expect(close16(ctx[k], (float)want, 2e-5f * sd), HD == 32 ? "attention hd32" : "attention hd64",
                 (long long)k, half_value(ctx[k]), (float)want);
        }
      }
}

void test_pool(int n, const std::vector<int32_t>& lens) {
  std::vector<int32_t> start{0};
  for (int L : lens) start.push_back(start.back() + L);
  const int nseq = (int)lens.size();
  auto x = normal((size_t)start.back() * n, 1);
  for (int cls = 0; cls < 2; cls++)
    for (int norm = 0; norm < 2; norm++) {
      std::vector<float> out(nseq * n, NAN);
      cuemu::launch(dim3(nseq), dim3(NG_BLOCK), ng_pool, out.data(), (const float*)x.data(),
                    (const int32_t*)start.data(), n, cls, norm);
      for (int s = 0; s < nseq; s++) {
        std::vector<float> want(n, 0.0f);  // nn_pool's steps with nn_ref's ops
        const int rows = cls ? std::min(lens[s], 1) : lens[s];
        for (int r = 0; r < rows; r++) nn_ops_ref.add(want.data(), &x[(size_t)(start[s] + r) * n], n);
        if (!cls && lens[s] > 0) nn_ops_ref.scale(want.data(), n, 1.0f / (float)lens[s]);
        if (norm) {
          float nrm = std::sqrt(nn_ops_ref.sumsq(want.data(), n));
          nn_ops_ref.scale(want.data(), n, 1.0f / std::max(nrm, 1e-12f));
        }
        for (int c = 0; c < n; c++)
          expect(close32(out[s * n + c], want[c]), cls ? "pool cls" : "pool mean", s * n + c, out[s * n + c], want[c]);
      }
    }
}

// test_to_half checks the weight conversion against nn_ref's float_to_half (ties to even,
// subnormals, overflow to inf).
void test_to_half(long long n) {
  auto w = normal(n, 1);
  w[0] = 65519.0f, w[1] = 65520.0f, w[2] = 1e-7f, w[3] = -2.98023224e-8f, w[4] = 1.00048828125f;
  std::vector<uint16_t> got(n), want(n);
  cuemu::launch(dim3(3), dim3(NG_BLOCK), ng_to_half_rows, got.data(), (const float*)w.data(), n);
  nn_ops_ref.float_to_half(want.data(), w.data(), n);
  for (long long i = 0; i < n; i++) expect(got[i] == want[i], "to_half", i, half_value(got[i]), half_value(want[i]));
}

}  // namespace

int main() {
  test_to_half(2000);
  for (int n : {1, 33, 384, 768, NG_MAX_HIDDEN}) test_layernorms(n, 5);
  test_gelu(3, 1000, 2);   // fewer threads than values: the grid-stride loop
  test_gelu(1, 37, 64);    // more threads than values
  const std::vector<int32_t> lens{1, 7, 64, 65, 130, 2, 512};
  test_attention<32>(lens, 3, 1.0f);
  test_attention<64>(lens, 2, 1.0f);
  test_attention<64>({129, 1, 33}, 1, 6.0f);  // peaked softmax: the running max is rescaled often
  test_pool(33, {1, 0, 5, 2});
  test_pool(768, {3, 130});
  if (failures) {
    std::printf("nngpu_cuda_emu: %d mismatches\n", failures);
    return 1;
  }
  std::printf("nngpu_cuda_emu: ok\n");
  return 0;
}
