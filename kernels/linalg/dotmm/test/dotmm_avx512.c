// The test's 16-lane instance: the product kernel (run where the CPU has AVX-512F).
#pragma GCC target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")
#define VW 16
#define SUFFIX avx512
#define DOTMM_NAME test
#include "../dotmm_vec.h"
