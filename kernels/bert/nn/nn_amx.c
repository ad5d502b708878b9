// AMX level: avx512bf16's row kernels, with the bf16 GEMM on AMX tiles (TDPBF16PS, nn_tiles.h).
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,avx512vnni,avx512bf16,amx-tile,amx-bf16")
#define VW 16
#define SUFFIX amx
#include "nn_vec.h"
