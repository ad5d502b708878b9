/* AVX-512 (F/BW/DQ/VL) encode and check: delta_vec.h at 16 lanes. */
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,bmi")
#define VW 16
#define SUFFIX avx512
#include "delta_vec.h"
