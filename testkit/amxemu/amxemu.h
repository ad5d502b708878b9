// amxemu.h: the AMX tile operations kernels/bert/nn/nn_tiles.h is written against (TILE_*),
// emulated in C so its blocking runs in tests on CPUs without AMX (the development machines and
// CI have none). Eight tiles of at most 16 rows of 64 bytes, shaped by the last TILE_CONFIG
// (LDTILECFG's 64-byte palette-1 operand, which also zeroes them). What the CPU would refuse
// (#UD: a tile used unconfigured, shapes TDPBF16PS cannot multiply, a row or byte count past
// 16 / 64) aborts with a message instead. TDPBF16PS's arithmetic is the pseudocode of Intel's
// SDM: for each C element, per pair of inputs, the even then the odd product (exact in float32)
// added in float32, round to nearest even. The SDM also flushes denormal inputs and outputs,
// which this does not: tests compare against the scalar reference with a tolerance, and check
// bit for bit only what holds on the real tiles too (each row of C depends on its own rows).
#ifndef NEEDLE_AMXEMU_H
#define NEEDLE_AMXEMU_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  uint8_t data[16][64];
  int rows, colsb;
} amxemu_tile;

static amxemu_tile amxemu_tiles[8];
static int amxemu_configured;

static void amxemu_fail(const char* what, int t) {
  fprintf(stderr, "amxemu: %s (tile %d)\n", what, t);
  abort();
}

static amxemu_tile* amxemu_use(int t) {
  if (!amxemu_configured) amxemu_fail("tile used before TILE_CONFIG (or after TILE_RELEASE)", t);
  if (t < 0 || t > 7 || amxemu_tiles[t].rows == 0) amxemu_fail("tile not configured", t);
  return &amxemu_tiles[t];
}

static inline void amxemu_config(const void* cfg) {
  const uint8_t* c = (const uint8_t*)cfg;
  if (c[0] != 1) amxemu_fail("palette is not 1", -1);
  for (int t = 0; t < 8; t++) {
    amxemu_tile* x = &amxemu_tiles[t];
    x->colsb = c[16 + 2 * t] | c[17 + 2 * t] << 8;
    x->rows = c[48 + t];
    if (x->rows > 16 || x->colsb > 64 || (x->rows == 0) != (x->colsb == 0)) amxemu_fail("shape past 16 x 64", t);
    memset(x->data, 0, sizeof x->data);
  }
  amxemu_configured = 1;
}

static inline void amxemu_load(int t, const void* p, int64_t stride) {
  amxemu_tile* x = amxemu_use(t);
  for (int r = 0; r < x->rows; r++) memcpy(x->data[r], (const uint8_t*)p + r * stride, (size_t)x->colsb);
}

static inline void amxemu_store(int t, void* p, int64_t stride) {
  amxemu_tile* x = amxemu_use(t);
  for (int r = 0; r < x->rows; r++) memcpy((uint8_t*)p + r * stride, x->data[r], (size_t)x->colsb);
}

static inline void amxemu_zero(int t) { memset(amxemu_use(t)->data, 0, sizeof amxemu_tiles[t].data); }

static inline float amxemu_bf16(const uint8_t* p) {
  uint32_t u = (uint32_t)(p[0] | p[1] << 8) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// amxemu_dpbf16ps is TDPBF16PS c += a * b: a is M x K bf16 (K/2 pairs a row), b K/2 x N pairs, c
// M x N floats.
static inline void amxemu_dpbf16ps(int tc, int ta, int tb) {
  amxemu_tile *c = amxemu_use(tc), *a = amxemu_use(ta), *b = amxemu_use(tb);
  if (a->rows != c->rows || a->colsb / 4 != b->rows || b->colsb != c->colsb || a->colsb % 4)
    amxemu_fail("TDPBF16PS shapes do not multiply", tc);
  for (int m = 0; m < c->rows; m++)
    for (int n = 0; n < c->colsb / 4; n++) {
      float acc;
      memcpy(&acc, c->data[m] + 4 * n, 4);
      for (int k = 0; k < a->colsb / 4; k++) {
        acc += amxemu_bf16(a->data[m] + 4 * k) * amxemu_bf16(b->data[k] + 4 * n);
        acc += amxemu_bf16(a->data[m] + 4 * k + 2) * amxemu_bf16(b->data[k] + 4 * n + 2);
      }
      memcpy(c->data[m] + 4 * n, &acc, 4);
    }
}

static inline void amxemu_release(void) { amxemu_configured = 0; }

#define TILE_CONFIG(c) amxemu_config(c)
#define TILE_ZERO(t) amxemu_zero(t)
#define TILE_LOAD(t, p, stride) amxemu_load(t, p, stride)
#define TILE_DPBF16PS(c, a, b) amxemu_dpbf16ps(c, a, b)
#define TILE_STORE(t, p, stride) amxemu_store(t, p, stride)
#define TILE_RELEASE() amxemu_release()

#endif
