// libneedle.so entry points: the SIMD level (picked by platform/cpu/cpu.c, as in Go), and
// the logprob functions over the C kernels of kernels/trainer/logprob (the same sources the Go
// package compiles).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "capi_internal.h"
#include "platform/cpu/cpu.h"
#include "kernels/trainer/logprob/logprob.h"
#include "needle.h"

static pthread_once_t level_once = PTHREAD_ONCE_INIT;
static int32_t level_value;
static char level_err[256];

static void pick_level(void) {
  level_value = nl_cpu_select(getenv("NEEDLE_SIMD"), level_err, sizeof level_err);
}

int32_t needle_capi_level(char* err, size_t err_len) {
  pthread_once(&level_once, pick_level);
  if (level_value < 0 && err_len > 0) snprintf(err, err_len, "%s", level_err);
  return level_value;
}

size_t needle_capi_errlen(const char* err, int64_t err_len) {
  return err && err_len > 0 ? (size_t)err_len : 0;
}

NEEDLE_API int32_t needle_abi_version(void) { return NEEDLE_ABI_VERSION; }

NEEDLE_API int32_t needle_simd_level(char* buf, int64_t buf_len) {
  size_t n = needle_capi_errlen(buf, buf_len);
  int32_t level = needle_capi_level(buf, n);
  if (level < 0) return -1;
  if (n > 0) snprintf(buf, n, "%s", nl_cpu_level_name(level));
  return 0;
}

// Messages go through snprintf(err, n, ...), which writes nothing when n is 0: callers that
// want no message pass err NULL.
static int32_t logprob(const void* logits, int32_t dtype, int64_t n, int64_t v,
                       const int64_t* labels, float temperature, int64_t ignore_index,
                       int32_t threads, float* out_logprob, float* out_entropy, float* out_lse,
                       char* err, int64_t err_len) {
  size_t n_err = needle_capi_errlen(err, err_len);
  int32_t level = needle_capi_level(err, n_err);
  if (level < 0) return -1;
  nl_logprob_args a = {logits, dtype, n, v, labels, temperature, ignore_index,
                       out_logprob, out_entropy, out_lse};
  return nl_logprob_run(&a, level, threads, err, n_err);
}

// One exported function per logits dtype; the signatures are spelled out in needle.h.
#define NEEDLE_LOGPROB(suffix, elem, dtype)                                                    \
  NEEDLE_API int32_t needle_logprob_##suffix(                                                  \
      const elem* logits, int64_t n, int64_t v, const int64_t* labels, float temperature,      \
      int64_t ignore_index, int32_t threads, float* out_logprob, float* out_entropy,           \
      float* out_lse, char* err, int64_t err_len) {                                            \
    return logprob(logits, dtype, n, v, labels, temperature, ignore_index, threads,            \
                   out_logprob, out_entropy, out_lse, err, err_len);                           \
  }
NEEDLE_LOGPROB(f32, float, NL_F32)
NEEDLE_LOGPROB(f16, uint16_t, NL_F16)
NEEDLE_LOGPROB(bf16, uint16_t, NL_BF16)

NEEDLE_API int32_t needle_linear_logprob_f32(const float* hidden, int64_t n, int64_t h,
                                             const float* lm_head, int64_t v,
                                             const int64_t* labels, float temperature,
                                             int64_t ignore_index, float* out_logprob,
                                             float* out_entropy, float* out_lse, char* err,
                                             int64_t err_len) {
  size_t n_err = needle_capi_errlen(err, err_len);
  int32_t level = needle_capi_level(err, n_err);
  if (level < 0) return -1;
  nl_logprob_args a = {NULL, NL_F32, n, v, labels, temperature, ignore_index,
                       out_logprob, out_entropy, out_lse};
  return nl_linear_logprob_run(hidden, h, lm_head, &a, level, err, n_err);
}
