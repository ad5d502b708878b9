// The bf16 Linear's GEMM on AMX tiles (TDPBF16PS), written once against the TILE_* operations
// its includer defines first: nn_vec.h maps them to the AMX intrinsics (the amx level),
// testkit/amxemu/amxemu.h to a C emulation of the instructions (tiles_test.c), so this
// blocking is tested where no CPU has AMX.
//
// A tile block is up to TILE_ROWS rows by two adjacent panels (32 outputs): C0, C1 (tiles 0,
// 1) hold the panels' sums; A (tile 2) TILE_ROWS rows by TILE_K inputs of the bf16 rows (stride
// k); B0, B1 (tiles 3, 4) a panel's TILE_K / 2 pairs of inputs for its 16 outputs, which is the
// pair packing itself (nn.h: 16 rows of 64 bytes, stride 64). Every C element sums its row's
// products chunk after chunk of TILE_K inputs, in order, whatever rows share its tile: a row
// gets the same bits alone or in any batch. k must be a multiple of TILE_K (the includer runs
// its vector GEMM otherwise; BERT's widths are).
#include <stdint.h>
#include <string.h>
#include "nn.h"

enum { TILE_ROWS = 16, TILE_K = 32, TILE_BLOCK = 2 * NN_PANEL };

// The 64-byte operand of LDTILECFG (palette 1).
typedef struct {
	uint8_t palette, start_row, reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
} tile_config;

// tiles_configure loads the tile shapes for blocks of m rows (LDTILECFG also zeroes every tile).
static inline void tiles_configure(int m) {
	tile_config c;
	memset(&c, 0, sizeof c);
	c.palette = 1;
	for (int t = 0; t < 5; t++) c.colsb[t] = 64; // C: 16 floats; A: 32 bf16; B: 16 pairs
	c.rows[0] = c.rows[1] = c.rows[2] = (uint8_t)m;
	c.rows[3] = c.rows[4] = TILE_K / 2;
	TILE_CONFIG(&c);
}

// tiles_block sets c[r*TILE_BLOCK + j] for r < the configured rows and j < 16*np to the sums
// of the a rows (k values, stride k) times the np (1 or 2) panels at w.
static inline void tiles_block(const uint16_t *a, const uint16_t *w, int64_t k, int np, float *c) {
	const uint16_t *w1 = w + k * NN_PANEL;
	TILE_ZERO(0);
	TILE_ZERO(1);
	for (int64_t i = 0; i < k; i += TILE_K) {
		TILE_LOAD(2, a + i, k * 2);
		TILE_LOAD(3, w + i * NN_PANEL, 64);
		TILE_DPBF16PS(0, 2, 3);
		if (np == 2) {
			TILE_LOAD(4, w1 + i * NN_PANEL, 64);
			TILE_DPBF16PS(1, 2, 4);
		}
	}
	TILE_STORE(0, c, TILE_BLOCK * 4);
	if (np == 2) TILE_STORE(1, c + NN_PANEL, TILE_BLOCK * 4);
}

// tiles_epilogue writes rows [r0, r0+m) of y (stride out) for the np panels from output o0 on
// (none past out) from the block's sums c: + b, then act (nn.h's dot_bf16).
typedef void (*tiles_epilogue)(const float *c, int m, int np, const float *b, float *y, int64_t o0, int64_t out,
                               int act);

// tiles_dot_bf16 is dot_bf16 (nn.h) for k a multiple of TILE_K: blocks of TILE_ROWS rows (the
// last of what is left) by pairs of panels, each finished by epi. Leaves the tiles released.
static inline void tiles_dot_bf16(const uint16_t *a, const uint16_t *w, const float *b, float *y, int64_t rows,
                                  int64_t k, int64_t p0, int64_t p1, int64_t out, int act, tiles_epilogue epi) {
	float c[TILE_ROWS * TILE_BLOCK];
	int m = 0;
	for (int64_t r = 0; r < rows; r += TILE_ROWS) {
		const int mr = rows - r < TILE_ROWS ? (int)(rows - r) : TILE_ROWS;
		if (mr != m) tiles_configure(m = mr);
		for (int64_t p = p0; p < p1; p += 2) {
			const int np = p1 - p < 2 ? 1 : 2;
			tiles_block(a + r * k, w + p * k * NN_PANEL, k, np, c);
			epi(c, mr, np, b, y + r * out, p * NN_PANEL, out, act);
		}
	}
	TILE_RELEASE();
}
