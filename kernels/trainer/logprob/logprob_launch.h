// logprob_launch.h: logprob.cu's launch shape, defined once for the kernel (logprob.cu), its C
// launcher (logprob_gpu.c, which Go's logprob.GPU and libneedle's needle_cuda_logprob_* run) and
// Go (cgo: C.NL_LOGPROB_BLOCK).
#ifndef NEEDLE_LOGPROB_LAUNCH_H
#define NEEDLE_LOGPROB_LAUNCH_H

// Threads per block; one block per row. The kernel takes any multiple of 32 up to 1024 (its
// full-mask shuffles need whole warps); this is the one the launcher uses.
#define NL_LOGPROB_BLOCK 256

#endif
