// logprob_gpu.c: logprob_gpu.h's launcher. Compiled into package logprob by cgo and into
// libneedle.so by capi/CMakeLists.txt; plain C11.
#include "kernels/trainer/logprob/logprob_gpu.h"

#include <stdio.h>

#include "kernels/trainer/logprob/dtype.h"

static const char* const kernel_names[3] = {
    [NL_F32] = "nl_cuda_logprob_f32", [NL_F16] = "nl_cuda_logprob_f16",
    [NL_BF16] = "nl_cuda_logprob_bf16"};

int nl_logprob_gpu_init(nl_logprob_gpu* g, nl_module* mod, char* err, size_t n_err) {
  for (int d = 0; d < 3; d++) {
    int st = nl_module_function(mod, kernel_names[d], &g->fn[d], err, n_err);
    if (st) return st;
  }
  return NL_CUDA_OK;
}

int nl_logprob_gpu_check(const char* what, uint64_t logits, int64_t n, int64_t v, uint64_t labels,
                         float temperature, uint64_t out_logprob, char* err, size_t n_err) {
  if (n < 0 || n > NL_CUDA_GRID_MAX || v < 1 || (n > 0 && (!logits || !labels || !out_logprob)) ||
      !(temperature > 0) || temperature == __builtin_inff()) {
    if (err && n_err > 0)
      snprintf(err, n_err,
               "%s: need 0 <= n <= 2^31-1, v >= 1, logits, labels and out_logprob, and a finite "
               "temperature > 0 (n=%lld v=%lld temperature=%g)",
               what, (long long)n, (long long)v, temperature);
    return NL_CUDA_ERR;
  }
  return NL_CUDA_OK;
}

int nl_logprob_gpu_run(const nl_logprob_gpu* g, int32_t dtype, uint64_t logits, int64_t n,
                       int64_t v, uint64_t labels, float temperature, int64_t ignore_index,
                       uint64_t out_logprob, uint64_t out_entropy, uint64_t out_lse,
                       uint64_t stream, char* err, size_t n_err) {
  if (dtype < 0 || dtype > 2) {
    if (err && n_err > 0) snprintf(err, n_err, "logprob on CUDA: unknown dtype %d", dtype);
    return NL_CUDA_ERR;
  }
  int st = nl_logprob_gpu_check(kernel_names[dtype], logits, n, v, labels, temperature,
                                out_logprob, err, n_err);
  if (st || n == 0) return st;
  // logprob.cu's parameters: logits, v, labels, 1/temperature, ignore_index, the three outputs.
  uint64_t args[] = {logits,        (uint64_t)v,        labels,     nl_cuda_arg_f32(1.0f / temperature),
                     (uint64_t)ignore_index, out_logprob, out_entropy, out_lse};
  const uint32_t grid[3] = {(uint32_t)n, 1, 1}, block[3] = {NL_LOGPROB_BLOCK, 1, 1};
  return nl_function_launch(&g->fn[dtype], grid, block, stream, args, 8, 0, err, n_err);
}
