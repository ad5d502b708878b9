// The 16-lane row kernel built for AVX2 (intrinsics on two 8-lane halves, see logprob_vec.h): it
// runs the AVX-512 kernel's arithmetic on any test machine, and must give its bits where both run.
#pragma GCC target("avx2,fma,f16c")
#define VW 16
#define SUFFIX lanes16
#include "../logprob_vec.h"
