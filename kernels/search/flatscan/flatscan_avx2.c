// flatscan's inner products at 8 float lanes (kernels/linalg/dotmm).
#pragma GCC target("avx2,fma")
#define VW 8
#define SUFFIX avx2
#define DOTMM_NAME flatscan
#include "../../linalg/dotmm/dotmm_vec.h"
