// dotmm: c[i * ldc + j] = dot(a row i, b row j) for two sets of row-major float32 rows of
// length d (queries x index rows in a flat scan, hidden states x lm_head rows in the fused
// logprob). Written once with GCC vector extensions, compiled per ISA by each package that
// uses it: a file defines VW (float lanes: 8 or 16), SUFFIX and DOTMM_NAME, sets the
// target pragma and includes this header, which then defines the external function
// DOTMM_NAME_SUFFIX (dotmm.h declares it and picks one per level).
//
// Batch invariance, the reason this exists instead of a BLAS sgemm: every dot product is
// computed the same way whatever rows surround it. Lane l of its accumulator sums the
// products of the elements t = l, l + VW, ... in order, by FMA, the tail zero-padded; then
// the lanes are added by one fixed tree (reduce8 below). So a query's scores are the same
// bits alone, among 63 others or among 2,559, and whichever tile shape or thread computed
// them; they depend only on the two rows, d and the level's VW. (A BLAS blocks and splits its
// sums by the matrix shapes and by the kernels it picks for the CPU, OPENBLAS_CORETYPE.)
//
// A tile is up to QB rows of a by JB rows of b: QB x JB accumulators in registers, each
// step loading JB vectors of b and one of a per a row. Tiles run b-major: a tile of b rows
// (streamed from memory in a scan) serves every a row from cache.
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define DOTMM_CAT2(a, b) a##_##b
#define DOTMM_CAT(a, b) DOTMM_CAT2(a, b)
#define DOTMM_F(name) DOTMM_CAT(DOTMM_CAT(DOTMM_NAME, name), SUFFIX)

typedef float DOTMM_F(vf) __attribute__((vector_size(VW * 4)));
typedef float DOTMM_F(v8) __attribute__((vector_size(32)));
#define vf DOTMM_F(vf)
#define v8 DOTMM_F(v8)

// Rows of a mapped index file may start at any byte: loads are unaligned (memcpy).
static inline vf DOTMM_F(load)(const float *p) {
	vf v;
	memcpy(&v, p, sizeof v);
	return v;
}

// loadz loads rem < VW floats, zero in the other lanes.
static inline vf DOTMM_F(loadz)(const float *p, int64_t rem) {
	vf v = {0};
	memcpy(&v, p, (size_t)rem * 4);
	return v;
}

// fma is a * b + c rounded once. The 16-lane kernel without AVX-512F is not a product path:
// it lets the tests run the 16-lane logic on AVX2 machines (two 8-lane FMAs, the same bits).
static inline vf DOTMM_F(fma)(vf a, vf b, vf c) {
#if VW == 16 && defined(__AVX512F__)
	return (vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif VW == 16
	v8 a0, a1, b0, b1, c0, c1;
	memcpy(&a0, &a, 32), memcpy(&a1, (char *)&a + 32, 32);
	memcpy(&b0, &b, 32), memcpy(&b1, (char *)&b + 32, 32);
	memcpy(&c0, &c, 32), memcpy(&c1, (char *)&c + 32, 32);
	c0 = (v8)_mm256_fmadd_ps((__m256)a0, (__m256)b0, (__m256)c0);
	c1 = (v8)_mm256_fmadd_ps((__m256)a1, (__m256)b1, (__m256)c1);
	vf r;
	memcpy(&r, &c0, 32), memcpy((char *)&r + 32, &c1, 32);
	return r;
#else
	return (vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#endif
}

// fold8 adds the upper 8 lanes of a 16-lane accumulator onto the lower 8 (lane l + lane l+8);
// at 8 lanes it is the identity.
static inline v8 DOTMM_F(fold8)(vf v) {
#if VW == 16
	// Shuffles, not memcpy from &v: an accumulator whose address is taken is kept in memory by
	// GCC, which then loads and stores it at every FMA of the tile's loop.
	return __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
	       __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
#else
	return v;
#endif
}

// reduce8 writes the lane sums of up to 8 accumulators (n of them; the others count as zero
// vectors) to out[0..n): each sum is ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) of
// its folded lanes, the tree of two rounds of hadd and one cross-half add, whichever of the 8
// places the accumulator takes.
static inline void DOTMM_F(reduce8)(const vf *acc, int n, float *out) {
	__m256 f[8];
	for (int k = 0; k < 8; k++) f[k] = k < n ? (__m256)DOTMM_F(fold8)(acc[k]) : _mm256_setzero_ps();
	const __m256 h0 = _mm256_hadd_ps(f[0], f[1]), h1 = _mm256_hadd_ps(f[2], f[3]);
	const __m256 h2 = _mm256_hadd_ps(f[4], f[5]), h3 = _mm256_hadd_ps(f[6], f[7]);
	const __m256 g0 = _mm256_hadd_ps(h0, h1), g1 = _mm256_hadd_ps(h2, h3);
	// g0 = [a0 a1 a2 a3 | a0' a1' a2' a3'] (low and high half sums), g1 the same for a4..a7.
	const __m256 s = _mm256_add_ps(_mm256_permute2f128_ps(g0, g1, 0x20), _mm256_permute2f128_ps(g0, g1, 0x31));
	float r[8];
	_mm256_storeu_ps(r, s);
	memcpy(out, r, (size_t)n * 4);
}

// Tile shapes: 16 accumulators of 32 zmm registers at 16 lanes; at 8 lanes 12 accumulators,
// the 4 b vectors and one a vector fill the 16 ymm registers without a spill (measured on Zen 3,
// one core, 64 x 1,024 rows of 1,024: 3 x 4 62, 4 x 3 71, 3 x 3 66, 2 x 4 43 GFLOP/s; rows of
// 384: 82, 79, 66, 50).
#if VW == 16
#define DOTMM_QB 4
#define DOTMM_JB 4
#else
#define DOTMM_QB 3
#define DOTMM_JB 4
#endif

// tile computes the nq x nb (constants once inlined) dot products of the a rows at a (stride
// lda) with the b rows at b (stride ldb) into c (stride ldc). With next set, it also prefetches
// the next tile's DOTMM_JB b rows into L2 as it goes, a cache line per row at a time: a scan's
// rows come from memory (30 MB for 20,000 x 384), and the hardware prefetcher alone left a tile's
// first loads waiting on them (measured: one thread, 32 queries, 58 GFLOP/s on 20,000 rows
// against 81 on 2,000 that stay in cache).
static inline __attribute__((always_inline)) void DOTMM_F(tile)(const float *a, int64_t lda, int nq,
		const float *b, int64_t ldb, int nb, int64_t d, float *c, int64_t ldc, const float *next) {
	vf acc[DOTMM_QB * DOTMM_JB];
	for (int k = 0; k < nq * nb; k++) acc[k] = (vf){0};
	int64_t t = 0;
	for (; t + VW <= d; t += VW) {
		vf bv[DOTMM_JB];
		if (next && t % 16 == 0) // 16 floats: one 64-byte line of each row
			for (int j = 0; j < DOTMM_JB; j++) _mm_prefetch((const char *)(next + j * ldb + t), _MM_HINT_T1);
		for (int j = 0; j < nb; j++) bv[j] = DOTMM_F(load)(b + j * ldb + t);
		for (int q = 0; q < nq; q++) {
			const vf av = DOTMM_F(load)(a + q * lda + t);
			for (int j = 0; j < nb; j++) acc[q * nb + j] = DOTMM_F(fma)(av, bv[j], acc[q * nb + j]);
		}
	}
	if (t < d) { // the tail, zero-padded: a zero lane adds an exact 0 to its sum
		vf bv[DOTMM_JB];
		for (int j = 0; j < nb; j++) bv[j] = DOTMM_F(loadz)(b + j * ldb + t, d - t);
		for (int q = 0; q < nq; q++) {
			const vf av = DOTMM_F(loadz)(a + q * lda + t, d - t);
			for (int j = 0; j < nb; j++) acc[q * nb + j] = DOTMM_F(fma)(av, bv[j], acc[q * nb + j]);
		}
	}
	float sum[DOTMM_QB * DOTMM_JB];
	for (int k = 0; k < nq * nb; k += 8) DOTMM_F(reduce8)(acc + k, nq * nb - k < 8 ? nq * nb - k : 8, sum + k);
	for (int q = 0; q < nq; q++) memcpy(c + q * ldc, sum + q * nb, (size_t)nb * 4);
}

// DOTMM_TILE gives every tile shape (nq, nb) its own inlined tile.
#define DOTMM_TILE(q, b_) \
	case (q) * 16 + (b_): DOTMM_F(tile)(a + i * lda, lda, q, bj, ldb, b_, d, c + i * ldc + j, ldc, i ? NULL : next); break;
#define DOTMM_TILES_Q(q) DOTMM_TILE(q, 1) DOTMM_TILE(q, 2) DOTMM_TILE(q, 3) DOTMM_TILE(q, 4)

void DOTMM_F(dotmm)(const float *a, int64_t lda, int64_t na, const float *b, int64_t ldb, int64_t nb, int64_t d,
                    float *c, int64_t ldc) {
	for (int64_t j = 0; j < nb; j += DOTMM_JB) {
		const float *bj = b + j * ldb;
		const int jn = nb - j < DOTMM_JB ? (int)(nb - j) : DOTMM_JB;
		// The first a tile of each b tile prefetches the next whole b tile (the last has none).
		const float *next = j + 2 * DOTMM_JB <= nb ? bj + DOTMM_JB * ldb : NULL;
		for (int64_t i = 0; i < na; i += DOTMM_QB) {
			const int qn = na - i < DOTMM_QB ? (int)(na - i) : DOTMM_QB;
			switch (qn * 16 + jn) {
				DOTMM_TILES_Q(1)
				DOTMM_TILES_Q(2)
				DOTMM_TILES_Q(3)
#if DOTMM_QB == 4
				DOTMM_TILES_Q(4)
#endif
			}
		}
	}
}

#undef DOTMM_TILE
#undef DOTMM_TILES_Q
#undef DOTMM_QB
#undef DOTMM_JB
#undef vf
#undef v8
