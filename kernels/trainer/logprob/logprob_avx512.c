// AVX-512: the row kernel of logprob_vec.h and the fused op's logits (logprob_linear.c, dotmm)
// at 16 lanes.
#if defined(__x86_64__)
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma,f16c")
#define VW 16
#define SUFFIX avx512
#include "logprob_vec.h"

#define DOTMM_NAME logprob
#include "../../linalg/dotmm/dotmm_vec.h"
#endif
