// The bf16 GEMM's tile blocking (nn_tiles.h) on emulated AMX tiles (testkit/amxemu) against the
// scalar reference (nn_ref.c's dot_bf16): row counts around the 16-row tile, one and two panels
// per block, outputs past the last whole panel, a range of panels, bias and GELU; each row's
// bits the same alone as in its batch; the tiles released. The real tiles run the same code
// where the CPU has AMX (the Go tests of kernels/bert/nn at NEEDLE_SIMD=amx).
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../../testkit/amxemu/amxemu.h"
#include "../nn_tiles.h"

static int failures;

// epilogue: + b, then the reference's activation (nn_ref.c's bias_act).
static void epilogue(const float* c, int m, int np, const float* b, float* y, int64_t o0, int64_t out, int act) {
  for (int r = 0; r < m; r++)
    for (int j = 0; j < np * NN_PANEL && o0 + j < out; j++) {
      float v = c[r * TILE_BLOCK + j];
      nn_ops_ref.bias_act(&v, b ? b + o0 + j : NULL, 1, act);
      y[r * out + o0 + j] = v;
    }
}

static float uniform(void) { return (float)rand() / (float)RAND_MAX * 2 - 1; }

static void check(int64_t rows, int64_t in, int64_t out, int64_t p0, int64_t p1, int act) {
  const int64_t k = NN_BF16_K(in), panels = (out + NN_PANEL - 1) / NN_PANEL;
  uint16_t* a = calloc((size_t)(rows * k), 2);
  uint16_t* w = calloc((size_t)(panels * NN_PANEL * k), 2);
  float *b = malloc((size_t)out * 4), *y = malloc((size_t)(rows * out) * 4), *ref = malloc((size_t)(rows * out) * 4),
        *one = malloc((size_t)out * 4);
  for (int64_t i = 0; i < rows * k; i++) a[i] = i % k < in ? nn_bf16_round1(uniform()) : 0;
  for (int64_t o = 0; o < out; o++)
    for (int64_t i = 0; i < in; i++) w[nn_pair_at(o, i, k)] = nn_bf16_round1(uniform());
  for (int64_t o = 0; o < out; o++) b[o] = uniform();
  for (int64_t i = 0; i < rows * out; i++) y[i] = ref[i] = NAN;

  tiles_dot_bf16(a, w, b, y, rows, k, p0, p1, out, act, epilogue);
  if (amxemu_configured) printf("FAIL rows %lld: tiles not released\n", (long long)rows), failures++;
  nn_ops_ref.dot_bf16(a, w, b, ref, rows, k, p0, p1, out, act);
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t o = 0; o < out; o++) {
      const float got = y[r * out + o], want = ref[r * out + o];
      const int inside = o >= p0 * NN_PANEL && o < p1 * NN_PANEL;
      if (!inside) {
        if (!isnan(got)) printf("FAIL rows %lld out %lld: output %lld outside panels [%lld, %lld) written\n",
                                (long long)rows, (long long)out, (long long)o, (long long)p0, (long long)p1), failures++;
        continue;
      }
      // float sums of k exact products (|a|, |w| <= 1) against double ones, then + b and act
      const float tol = (float)k * 2 * FLT_EPSILON;
      if (!(fabsf(got - want) <= tol)) {
        printf("FAIL rows %lld in %lld out %lld act %d: y[%lld][%lld] = %.9g, reference %.9g\n", (long long)rows,
               (long long)in, (long long)out, act, (long long)r, (long long)o, got, want);
        failures++;
        goto done;
      }
    }
    // the row alone: the same bits as in the batch
    for (int64_t o = 0; o < out; o++) one[o] = NAN;
    tiles_dot_bf16(a + r * k, w, b, one, 1, k, p0, p1, out, act, epilogue);
    for (int64_t o = p0 * NN_PANEL; o < p1 * NN_PANEL && o < out; o++)
      if (memcmp(&one[o], &y[r * out + o], 4) != 0) {
        printf("FAIL rows %lld: row %lld alone differs at output %lld (%.9g vs %.9g in the batch)\n", (long long)rows,
               (long long)r, (long long)o, one[o], y[r * out + o]);
        failures++;
        goto done;
      }
  }
done:
  free(a), free(w), free(b), free(y), free(ref), free(one);
}

int main(void) {
  srand(7);
  const int64_t rows[] = {1, 3, 15, 16, 17, 33, 40}, ins[] = {32, 64, 384, 94}, outs[] = {16, 20, 48, 100};
  int cases = 0;
  for (size_t i = 0; i < sizeof ins / sizeof ins[0]; i++) {
    const int64_t k = NN_BF16_K(ins[i]);
    if (k % TILE_K) continue;  // the level runs its vector GEMM there (nn_vec.h)
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
      for (size_t o = 0; o < sizeof outs / sizeof outs[0]; o++) {
        const int64_t panels = (outs[o] + NN_PANEL - 1) / NN_PANEL;
        for (int act = NN_ACT_NONE; act <= NN_ACT_GELU; act++) {
          check(rows[r], ins[i], outs[o], 0, panels, act);
          if (panels > 1) check(rows[r], ins[i], outs[o], 1, panels, act);  // a team task's range
          cases += panels > 1 ? 2 : 1;
        }
      }
  }
  if (cases < 100) printf("FAIL only %d cases\n", cases), failures++;
  printf("%s: %d cases, %d failures\n", failures ? "FAIL" : "PASS", cases, failures);
  return failures != 0;
}
