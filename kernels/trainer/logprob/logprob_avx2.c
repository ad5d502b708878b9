// AVX2 + FMA + F16C: the row kernel of logprob_vec.h and the fused op's logits
// (logprob_linear.c, dotmm) at 8 lanes.
#if defined(__x86_64__)
#pragma GCC target("avx2,fma,f16c")
#define VW 8
#define SUFFIX avx2
#include "logprob_vec.h"

#define DOTMM_NAME logprob
#include "../../linalg/dotmm/dotmm_vec.h"
#endif
