// Runs the CUDA delta kernels (delta.cu, the very source compiled to PTX) on the CPU through
// testkit/cudaemu/cudaemu.h and compares them with the scalar C reference (nl_delta_encode at
// level ref): indices and values byte for byte, and apply reproducing the new tensor.
// A ctest test: `ctest --test-dir build/native -R delta_cuda_emu` (part of `make test`).
extern "C" {
#include "kernels/trainer/delta/delta.h"
}
#include "testkit/cudaemu/cudaemu.h"  // the host emulation the .cu runs under
#include "kernels/trainer/delta/delta.cu"

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

struct Case {
  long long n;
  int elem_size, idx_size;
  double frac;
  unsigned block;
};

// run_encode runs count, the host prefix sum and write; returns nnz.
template <typename T>
long long run_encode(const Case& c, const std::vector<T>& o, const std::vector<T>& w,
                     std::vector<unsigned char>& idx, std::vector<T>& vals) {
  unsigned tile = c.block * NL_DELTA_ITEMS, grid = (unsigned)((c.n + tile - 1) / tile);
  std::vector<unsigned> counts(grid);
  std::vector<unsigned long long> offsets(grid);
  auto count = sizeof(T) == 2 ? (void (*)(const T*, const T*, long long, unsigned*))nl_cuda_delta_count16
                              : (void (*)(const T*, const T*, long long, unsigned*))nl_cuda_delta_count32;
  auto write = sizeof(T) == 2
                   ? (void (*)(const T*, const T*, long long, const unsigned long long*, void*, int, T*))nl_cuda_delta_write16
                   : (void (*)(const T*, const T*, long long, const unsigned long long*, void*, int, T*))nl_cuda_delta_write32;
  cuemu::launch(dim3(grid), dim3(c.block), count, o.data(), w.data(), c.n, counts.data());
  unsigned long long run = 0;
  for (unsigned b = 0; b < grid; b++) offsets[b] = run, run += counts[b];
  cuemu::launch(dim3(grid), dim3(c.block), write, o.data(), w.data(), c.n,
                (const unsigned long long*)offsets.data(), (void*)idx.data(), c.idx_size, vals.data());
  return (long long)run;
}

template <typename T>
int run_case(const Case& c, std::mt19937& rng) {
  std::vector<T> o(c.n), w(c.n);
  std::uniform_real_distribution<double> u(0, 1);
  for (long long i = 0; i < c.n; i++) {
    o[i] = (T)rng();
    w[i] = u(rng) < c.frac ? (T)(o[i] ^ (T)(1 + rng() % 0xff)) : o[i];
  }
  std::vector<unsigned char> want_idx(c.n * c.idx_size + 1), got_idx(c.n * c.idx_size + 1);
  std::vector<T> want_vals(c.n + 1), got_vals(c.n + 1);
  char err[256];
  long long want = nl_delta_encode(NL_LEVEL_REF, o.data(), w.data(), c.n, c.elem_size, 0,
                                   want_idx.data(), c.idx_size, want_vals.data(), err, sizeof err);
  long long got = run_encode<T>(c, o, w, got_idx, got_vals);
  int bad = 0;
  if (want < 0 || got != want ||
      std::memcmp(want_idx.data(), got_idx.data(), (size_t)want * c.idx_size) != 0 ||
      std::memcmp(want_vals.data(), got_vals.data(), (size_t)want * sizeof(T)) != 0) {
    std::printf("FAIL encode n=%lld es=%d is=%d frac=%.2f block=%u: nnz %lld, reference %lld\n",
                c.n, c.elem_size, c.idx_size, c.frac, c.block, got, want);
    bad++;
  }
  std::vector<T> base = o;
  unsigned grid = (unsigned)((want + c.block - 1) / c.block);
  auto apply = sizeof(T) == 2 ? (void (*)(T*, const void*, int, const T*, long long))nl_cuda_delta_apply16
                              : (void (*)(T*, const void*, int, const T*, long long))nl_cuda_delta_apply32;
  cuemu::launch(dim3(grid > 64 ? 64 : grid), dim3(c.block), apply, base.data(),
                (const void*)want_idx.data(), c.idx_size, (const T*)want_vals.data(), want);
  if (base != w) {
    std::printf("FAIL apply n=%lld es=%d is=%d frac=%.2f block=%u\n", c.n, c.elem_size,
                c.idx_size, c.frac, c.block);
    bad++;
  }
  return bad;
}

}  // namespace

int main() {
  std::mt19937 rng(42);
  int bad = 0, cases = 0;
  // Thread-per-GPU-thread emulation is slow: small sizes at block 64 cover the tile edges
  // (tile = 64 * NL_DELTA_ITEMS = 512), two larger cases cover block 256 and many tiles.
  std::vector<Case> all;
  for (long long n : {0LL, 1LL, 33LL, 511LL, 513LL, 4099LL})
    for (int es : {2, 4})
      for (int is : {4, 8})
        for (double frac : {0.0, 0.01, 1.0}) all.push_back({n, es, is, frac, 64});
  all.push_back({20011, 2, 4, 0.02, 256});
  all.push_back({20011, 4, 8, 0.5, 256});
  for (const Case& c : all) {
    bad += c.elem_size == 2 ? run_case<uint16_t>(c, rng) : run_case<uint32_t>(c, rng);
    cases++;
  }
  std::printf("%s: %d of %d delta cases match the reference\n", bad ? "FAIL" : "ok", cases - bad,
              cases);
  return bad ? 1 : 0;
}
