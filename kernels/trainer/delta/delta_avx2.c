/* AVX2 encode and check: delta_vec.h at 8 lanes. */
#pragma GCC target("avx2,bmi")
#define VW 8
#define SUFFIX avx2
#include "delta_vec.h"
