// The test's 8-lane instance.
#pragma GCC target("avx2,fma")
#define VW 8
#define SUFFIX avx2
#define DOTMM_NAME test
#include "../dotmm_vec.h"
