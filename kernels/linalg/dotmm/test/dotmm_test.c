// dotmm's kernels against the scalar oracle on edge shapes, and their batch invariance: every
// dot product of a big call has the bits of the same product computed alone, and of the
// product computed in any other tile position. Exit status 0 when all pass.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dotmm.h"

DOTMM_DECLARE(test)
void test_dotmm_lanes16(const float *a, int64_t lda, int64_t na, const float *b, int64_t ldb, int64_t nb, int64_t d,
                        float *c, int64_t ldc);

static uint64_t rng = 88172645463325252ull;
static float rnd(void) { // xorshift64, uniform in [-1, 1)
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (float)((double)(rng >> 11) / 9007199254740992.0 * 2 - 1);
}

static int failures;
#define CHECK(cond, ...)                     \
	do {                                     \
		if (!(cond)) {                       \
			fprintf(stderr, __VA_ARGS__);    \
			fputc('\n', stderr);             \
			if (++failures > 20) exit(1);    \
		}                                    \
	} while (0)

// check runs one kernel on na x nb rows of length d (b shifted by one byte when misaligned):
// close to the oracle, and each product equal to the one computed alone.
static void check(const char *name, dotmm_fn f, int64_t na, int64_t nb, int64_t d, int misaligned) {
	const int64_t lda = d + 3, ldb = d + 1; // strides wider than d: rows are not contiguous
	float *a = malloc((size_t)(na * lda + 1) * 4), *c = malloc((size_t)(na * nb + 1) * 4);
	float *ref = malloc((size_t)(na * nb + 1) * 4);
	char *braw = malloc((size_t)(nb * ldb + 1) * 4 + 1);
	float *b = (float *)(braw + (misaligned ? 1 : 0));
	for (int64_t i = 0; i < na * lda; i++) a[i] = rnd();
	for (int64_t i = 0; i < nb * ldb; i++) {
		float v = rnd();
		memcpy((char *)b + 4 * i, &v, 4);
	}
	f(a, lda, na, b, ldb, nb, d, c, nb);
	dotmm_ref(a, lda, na, b, ldb, nb, d, ref, nb);
	for (int64_t i = 0; i < na; i++)
		for (int64_t j = 0; j < nb; j++) {
			float alone, mag = 0;
			f(a + i * lda, lda, 1, (const float *)((const char *)b + 4 * j * ldb), ldb, 1, d, &alone, 1);
			for (int64_t t = 0; t < d; t++) {
				float y;
				memcpy(&y, (const char *)b + 4 * (j * ldb + t), 4);
				mag += fabsf(a[i * lda + t] * y);
			}
			const float got = c[i * nb + j];
			CHECK(fabsf(got - ref[i * nb + j]) <= 1e-6f * (mag + 1), "%s %lldx%lld d=%lld: c[%lld,%lld] = %.9g, oracle %.9g",
			      name, (long long)na, (long long)nb, (long long)d, (long long)i, (long long)j, got, ref[i * nb + j]);
			CHECK(memcmp(&got, &alone, 4) == 0, "%s %lldx%lld d=%lld: c[%lld,%lld] = %.9g in the batch, %.9g alone", name,
			      (long long)na, (long long)nb, (long long)d, (long long)i, (long long)j, got, alone);
		}
	free(a), free(c), free(ref), free(braw);
}

// same16 checks that the AVX2-built 16-lane logic gives the AVX-512 kernel's bits.
static void same16(int64_t na, int64_t nb, int64_t d) {
	float *a = malloc((size_t)(na * d + 1) * 4), *b = malloc((size_t)(nb * d + 1) * 4);
	float *c1 = malloc((size_t)(na * nb + 1) * 4), *c2 = malloc((size_t)(na * nb + 1) * 4);
	for (int64_t i = 0; i < na * d; i++) a[i] = rnd();
	for (int64_t i = 0; i < nb * d; i++) b[i] = rnd();
	test_dotmm_avx512(a, d, na, b, d, nb, d, c1, nb);
	test_dotmm_lanes16(a, d, na, b, d, nb, d, c2, nb);
	CHECK(memcmp(c1, c2, (size_t)(na * nb) * 4) == 0, "lanes16 and avx512 differ at %lldx%lld d=%lld", (long long)na,
	      (long long)nb, (long long)d);
	free(a), free(b), free(c1), free(c2);
}

int main(void) {
	const int64_t ds[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 384, 389};
	const int64_t ns[] = {1, 2, 3, 4, 5, 7, 9, 13};
	struct {
		const char *name;
		dotmm_fn f;
		int32_t level;
	} kernels[] = {{"ref", dotmm_ref, NL_LEVEL_REF},
	               {"avx2", test_dotmm_avx2, NL_LEVEL_AVX2},
	               {"lanes16", test_dotmm_lanes16, NL_LEVEL_AVX2},
	               {"avx512", test_dotmm_avx512, NL_LEVEL_AVX512}};
	const int32_t have = nl_cpu_supported();
	for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
		if (kernels[k].level > have) {
			printf("dotmm: %s skipped: this CPU's best level is %s\n", kernels[k].name, nl_cpu_level_name(have));
			continue;
		}
		for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++)
			for (size_t ai = 0; ai < sizeof ns / sizeof ns[0]; ai++)
				for (size_t bi = 0; bi < sizeof ns / sizeof ns[0]; bi++)
					check(kernels[k].name, kernels[k].f, ns[ai], ns[bi], ds[di], (int)((ai + bi) % 2));
		check(kernels[k].name, kernels[k].f, 64, 1030, 384, 1);
	}
	if (have >= NL_LEVEL_AVX512)
		for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++) same16(9, 13, ds[di]);
	else
		printf("dotmm: lanes16 vs avx512 skipped: this CPU's best level is %s\n", nl_cpu_level_name(have));
	if (failures) {
		fprintf(stderr, "dotmm: %d failures\n", failures);
		return 1;
	}
	printf("dotmm: ok\n");
	return 0;
}
