// libneedle.so entry point for the read-bandwidth loop of platform/membw (the same
// source the Go package compiles) at the library's SIMD level.
#include <stdio.h>

#include "capi_internal.h"
#include "needle.h"
#include "platform/membw/membw.h"

NEEDLE_API int32_t needle_membw_read(const void* buf, int64_t bytes, uint64_t* out_sum, char* err,
                                     int64_t err_len) {
  size_t n_err = needle_capi_errlen(err, err_len);
  int32_t level = needle_capi_level(err, n_err);
  if (level < 0) return -1;
  if (bytes < 0 || (bytes > 0 && !buf) || !out_sum) {
    if (n_err > 0) snprintf(err, n_err, "membw: need a buffer of >= 0 bytes and an output");
    return -1;
  }
  *out_sum = nl_membw_read(level, buf, (size_t)bytes / 8);
  return 0;
}
