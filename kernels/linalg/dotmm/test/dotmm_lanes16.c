// The 16-lane logic built for AVX2 (fma and the tail as two 8-lane halves): it runs the
// AVX-512 kernel's arithmetic on any test machine, and must match it bit for bit where both run.
#pragma GCC target("avx2,fma")
#define VW 16
#define SUFFIX lanes16
#define DOTMM_NAME test
#include "../dotmm_vec.h"
