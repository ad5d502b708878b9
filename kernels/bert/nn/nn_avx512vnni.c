// AVX-512 + VNNI row kernels: the shared vector source at 16 float lanes; the int8 GEMM sums
// its int16 pairs with vpdpwssd.
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,avx512vnni")
#define VW 16
#define SUFFIX avx512vnni
#include "nn_vec.h"
