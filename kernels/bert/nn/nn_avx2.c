// AVX2 + FMA row kernels: the shared vector source at 8 float lanes.
#pragma GCC target("avx2,fma,f16c")
#define VW 8
#define SUFFIX avx2
#include "nn_vec.h"
