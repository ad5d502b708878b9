// dotmm.h: the batch-invariant dot-product GEMM of dotmm_vec.h, as its users declare and pick
// it. A package that uses it compiles dotmm_vec.h once per ISA under its own DOTMM_NAME (its
// symbols must not collide with another package's copy in the same binary) and declares the
// results with DOTMM_DECLARE(name); dotmm_ref is the scalar oracle of its tests.
#ifndef NEEDLE_DOTMM_H
#define NEEDLE_DOTMM_H
#include <stdint.h>

#include "../../../platform/cpu/cpu.h"

// c[i * ldc + j] = dot(a + i * lda, b + j * ldb) over d floats, i < na, j < nb. a and b may
// be at any alignment; c must not overlap them.
typedef void (*dotmm_fn)(const float *a, int64_t lda, int64_t na, const float *b, int64_t ldb, int64_t nb,
                         int64_t d, float *c, int64_t ldc);

#define DOTMM_DECLARE(name)                                                                                   \
	void name##_dotmm_avx2(const float *a, int64_t lda, int64_t na, const float *b, int64_t ldb, int64_t nb,   \
	                       int64_t d, float *c, int64_t ldc);                                                  \
	void name##_dotmm_avx512(const float *a, int64_t lda, int64_t na, const float *b, int64_t ldb, int64_t nb, \
	                         int64_t d, float *c, int64_t ldc);                                                \
	static inline dotmm_fn name##_dotmm_pick(int32_t level) {                                                 \
		switch (nl_cpu_at_most(level, NL_LEVEL_AVX512)) {                                                     \
		case NL_LEVEL_AVX512: return name##_dotmm_avx512;                                                     \
		case NL_LEVEL_AVX2: return name##_dotmm_avx2;                                                         \
		}                                                                                                     \
		return dotmm_ref;                                                                                     \
	}

// dotmm_ref sums each dot product in order, in double, rounded once: the oracle (its bits
// differ from the vector kernels' by their float rounding).
static inline void dotmm_ref(const float *a, int64_t lda, int64_t na, const float *b, int64_t ldb, int64_t nb,
                             int64_t d, float *c, int64_t ldc) {
	typedef float ufloat __attribute__((aligned(1)));
	for (int64_t i = 0; i < na; i++)
		for (int64_t j = 0; j < nb; j++) {
			const ufloat *x = (const ufloat *)(a + i * lda), *y = (const ufloat *)(b + j * ldb);
			double s = 0;
			for (int64_t t = 0; t < d; t++) s += (double)x[t] * y[t];
			c[i * ldc + j] = (float)s;
		}
}
#endif
