// flatscan's inner products at 16 float lanes (kernels/linalg/dotmm).
#pragma GCC target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")
#define VW 16
#define SUFFIX avx512
#define DOTMM_NAME flatscan
#include "../../linalg/dotmm/dotmm_vec.h"
