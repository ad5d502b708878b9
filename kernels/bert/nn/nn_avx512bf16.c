// AVX-512 + VNNI + BF16 row kernels: the shared vector source at 16 float lanes, with the bf16
// GEMM (vdpbf16ps) and row rounding (vcvtneps2bf16).
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,avx512vnni,avx512bf16")
#define VW 16
#define SUFFIX avx512bf16
#include "nn_vec.h"
