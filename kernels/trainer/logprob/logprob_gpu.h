// logprob_gpu.h: the C launcher of logprob.cu on the CUDA host core (cuda/host.h), the one used
// by Go (logprob.GPU, through cgo) and by libneedle.so (needle_cuda_logprob_*): which kernel of
// which dtype, the grid, the parameter layout. Errors: host.h's rules (status, text in err).
#ifndef NEEDLE_LOGPROB_GPU_H
#define NEEDLE_LOGPROB_GPU_H

#include "cuda/host.h"
#include "kernels/trainer/logprob/logprob_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

// nl_logprob_gpu is logprob.cu's kernels on one device, by dtype (NL_F32, NL_F16, NL_BF16 of
// dtype.h). Caller-owned; valid while the module it was found in stays loaded.
typedef struct {
  nl_function fn[3];
} nl_logprob_gpu;

// nl_logprob_gpu_init finds the kernels in mod, a module of logprob.cu's images.
int nl_logprob_gpu_init(nl_logprob_gpu* g, nl_module* mod, char* err, size_t n_err);

// nl_logprob_gpu_check refuses arguments the launch cannot take, before any device call:
// n outside [0, NL_CUDA_GRID_MAX] (a block per row), v < 1, a null logits, labels or
// out_logprob when n > 0, a temperature that is not finite and > 0. The error starts "what: ".
int nl_logprob_gpu_check(const char* what, uint64_t logits, int64_t n, int64_t v, uint64_t labels,
                         float temperature, uint64_t out_logprob, char* err, size_t n_err);

// nl_logprob_gpu_run queues the kernel of dtype on stream: logits [n, v] and labels [n] in,
// per row the log-prob of its label (0 for ignore_index; NaN for a label outside [0, v)), the
// entropy and the log-sum-exp out (device addresses; out_entropy and out_lse may be 0), at
// temperature. It checks its arguments as nl_logprob_gpu_check; n == 0 launches nothing.
int nl_logprob_gpu_run(const nl_logprob_gpu* g, int32_t dtype, uint64_t logits, int64_t n,
                       int64_t v, uint64_t labels, float temperature, int64_t ignore_index,
                       uint64_t out_logprob, uint64_t out_entropy, uint64_t out_lse,
                       uint64_t stream, char* err, size_t n_err);

#ifdef __cplusplus
}
#endif

#endif
