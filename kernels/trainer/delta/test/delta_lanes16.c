/* The 16-lane encode and check built for AVX2 (compares on 32-byte halves, see delta_vec.h): they
 * run the AVX-512 kernels' logic on any test machine. */
#pragma GCC target("avx2,bmi")
#define VW 16
#define SUFFIX lanes16
#include "../delta_vec.h"
