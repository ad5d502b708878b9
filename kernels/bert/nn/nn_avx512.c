// AVX-512 row kernels: the shared vector source at 16 float lanes.
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")
#define VW 16
#define SUFFIX avx512
#include "nn_vec.h"
