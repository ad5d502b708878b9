// Runs selftest.cu under host emulation and checks each result against what CUDA defines.
#include "testkit/cudaemu/selftest.cu"

#include <cstdio>
#include <vector>

static int failures = 0;

static void expect(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  failures += !ok;
}

int main() {
  {
    const unsigned blocks = 3, threads = 96;
    std::vector<float> in(blocks * threads), out(blocks);
    for (unsigned i = 0; i < in.size(); i++) in[i] = (float)(i % 7);
    int count = 0;
    unsigned max_tid = 0;
    cuemu::launch(dim3(blocks), dim3(threads), block_sum, (const float*)in.data(), out.data(),
                  &count, &max_tid);
    bool sums = true;
    for (unsigned b = 0; b < blocks; b++) {
      float want = 0;
      for (unsigned t = 0; t < threads; t++) want += in[b * threads + t];
      sums = sums && out[b] == want;
    }
    expect(sums, "block_sum: xor shuffles + shared memory + __syncthreads per block");
    expect(count == (int)(blocks * threads), "block_sum: atomicAdd(int) counted every thread");
    expect(max_tid == threads - 1, "block_sum: atomicMax(unsigned)");
  }
  {
    const unsigned threads = 64;
    std::vector<int> in(threads), down(threads), bcast(threads);
    for (unsigned i = 0; i < threads; i++) in[i] = (int)(i * 3 + 1);
    float fsum = 0;
    cuemu::launch(dim3(1), dim3(threads), shuffles, (const int*)in.data(), down.data(),
                  bcast.data(), &fsum);
    bool ok_down = true, ok_bcast = true;
    for (unsigned t = 0; t < threads; t++) {
      unsigned lane = t % 32, base = t - lane;
      ok_down = ok_down && down[t] == (lane == 31 ? in[t] : in[t + 1]);
      ok_bcast = ok_bcast && bcast[t] == in[base + 3];
    }
    float want = 0;
    for (int v : in) want += (float)v;
    expect(ok_down, "shuffles: __shfl_down_sync(int), own value past the warp's end");
    expect(ok_bcast, "shuffles: __shfl_sync(int) broadcast within each warp");
    expect(fsum == want, "shuffles: __shfl_down_sync(float) tree + atomicAdd(float)");
  }
  {
    unsigned slot = 0, seen[8 * 4];
    unsigned long long total = 0;
    cuemu::launch(dim3(1), dim3(8, 4), cas_claim, &slot, &total, seen);
    bool ok_seen = true;
    for (unsigned i = 0; i < 32; i++) ok_seen = ok_seen && seen[i] == i;
    expect(total == 1 && slot >= 1 && slot <= 32, "cas_claim: atomicCAS has exactly one winner");
    expect(ok_seen, "cas_claim: 2D block threadIdx.y / blockDim.x");
  }
  return failures ? 1 : 0;
}
