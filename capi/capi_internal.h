// capi_internal.h: what the capi/*.c files share (not installed, not part of the ABI).
#ifndef NEEDLE_CAPI_INTERNAL_H
#define NEEDLE_CAPI_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/host.h"

#define NEEDLE_API __attribute__((visibility("default")))

// needle_capi_level returns the SIMD level (NL_LEVEL_*, platform/cpu/cpu.h) the library uses:
// NEEDLE_SIMD if set, else the best the CPU supports; -1 with a message in err when NEEDLE_SIMD
// is unknown or above what the CPU supports. Computed once; thread-safe.
int32_t needle_capi_level(char* err, size_t err_len);

// needle_capi_errlen turns the ABI's int64 err_len into a size_t (0 when err is NULL or <= 0).
size_t needle_capi_errlen(const char* err, int64_t err_len);

enum { NL_IMAGE_LOGPROB, NL_IMAGE_DELTA };

// nl_capi_image returns the fatbin (fatbin != 0) or the clang PTX of logprob.cu or delta.cu,
// linked into the library (capi_images.c); named after the file it came from ("logprob.fatbin"),
// data NULL when the build did not make it (no nvcc: no fatbin).
nl_image nl_capi_image(int image, int fatbin);

#endif
