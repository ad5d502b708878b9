// dtype.h: the element types of logits; their decoding to fp32 is kernels/common/half.h's (the
// one of every kernel), which logprob.cu includes on the GPU too.
#ifndef NEEDLE_LOGPROB_DTYPE_H
#define NEEDLE_LOGPROB_DTYPE_H

#include "../../common/half.h"

enum { NL_F32 = 0, NL_F16 = 1, NL_BF16 = 2 };  // element type of logits

#endif  // NEEDLE_LOGPROB_DTYPE_H
