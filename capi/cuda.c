// libneedle.so's CUDA entry points: logprob.cu and delta.cu on device memory the caller owns
// (a trainer's torch tensors), queued on the caller's stream. They are the C launchers the Go
// packages run too (logprob_gpu.c, delta_gpu.c) on the CUDA host core (cuda/host.c), which opens
// the driver at the first call, so the library builds and loads without CUDA; the kernel images
// (nvcc's fatbin when `make native` had nvcc, clang's PTX always) are linked into the library by
// capi_images.c.
//
// Work runs in the device's primary context, the one the CUDA runtime and PyTorch use, pushed
// current for each driver call and popped after, so the caller's own context state is left as
// it was. Per device, the handle and the loaded kernels are made once (under a mutex) and kept
// for the life of the process; a device whose call failed stays unhealthy (host.h).
#include <pthread.h>
#include <stdio.h>

#include "capi_internal.h"
#include "kernels/trainer/delta/delta_gpu.h"
#include "kernels/trainer/logprob/dtype.h"
#include "kernels/trainer/logprob/logprob_gpu.h"
#include "needle.h"

#define MAX_DEVICES 64
static struct {
  nl_device* dev;  // opened at the device's first call
  int ready;       // 1 once the kernels below are loaded
  nl_logprob_gpu logprob;
  nl_delta_gpu delta;
} devices[MAX_DEVICES];
static pthread_mutex_t devices_mu = PTHREAD_MUTEX_INITIALIZER;

// load_kernels loads one kernel source's images (the fatbin, else the PTX) on dev.
static int load_kernels(nl_device* dev, int image, nl_module** mod, char* err, size_t n_err) {
  return nl_module_load_kernels(dev, nl_capi_image(image, 1), nl_capi_image(image, 0), mod, NULL,
                                err, n_err);
}

// kernels sets device's loaded kernels, opening the device and loading them the first time (a
// failed load is tried again at the next call); -1 with the reason in err.
static int kernels(int32_t device, nl_logprob_gpu** logprob, nl_delta_gpu** delta, char* err,
                   size_t n_err) {
  if (device < 0 || device >= MAX_DEVICES) {  // nl_device_open says why, unless there is one
    nl_device* dev;
    if (nl_device_open(device, &dev, err, n_err) == NL_CUDA_OK) {
      nl_device_close(dev, NULL, 0);
      if (n_err > 0)
        snprintf(err, n_err, "CUDA device %d: libneedle.so runs on devices 0 to %d", device,
                 MAX_DEVICES - 1);
    }
    return -1;
  }
  pthread_mutex_lock(&devices_mu);
  int st = 0;
  if (!devices[device].dev) st = nl_device_open(device, &devices[device].dev, err, n_err);
  if (!st && !devices[device].ready) {
    nl_device* dev = devices[device].dev;
    nl_module *lm = NULL, *dm = NULL;
    st = load_kernels(dev, NL_IMAGE_LOGPROB, &lm, err, n_err);
    if (!st) st = nl_logprob_gpu_init(&devices[device].logprob, lm, err, n_err);
    if (!st) st = load_kernels(dev, NL_IMAGE_DELTA, &dm, err, n_err);
    if (!st) st = nl_delta_gpu_init(&devices[device].delta, dm, err, n_err);
    if (st) {  // the modules of a failed load are not kept
      if (lm) nl_module_unload(lm, NULL, 0);
      if (dm) nl_module_unload(dm, NULL, 0);
    }
    devices[device].ready = !st;
  }
  pthread_mutex_unlock(&devices_mu);
  if (st) return -1;
  if (logprob) *logprob = &devices[device].logprob;
  if (delta) *delta = &devices[device].delta;
  return 0;
}

static int32_t cuda_logprob(int32_t dtype, const char* name, uint64_t logits, int64_t n, int64_t v,
                            uint64_t labels, float temperature, int64_t ignore_index,
                            uint64_t out_logprob, uint64_t out_entropy, uint64_t out_lse,
                            int32_t device, uint64_t stream, char* err, int64_t err_len) {
  size_t n_err = needle_capi_errlen(err, err_len);
  nl_logprob_gpu* g;
  if (nl_logprob_gpu_check(name, logits, n, v, labels, temperature, out_logprob, err, n_err) ||
      kernels(device, &g, NULL, err, n_err))
    return -1;
  return nl_logprob_gpu_run(g, dtype, logits, n, v, labels, temperature, ignore_index, out_logprob,
                            out_entropy, out_lse, stream, err, n_err)
             ? -1
             : 0;
}

#define NEEDLE_CUDA_LOGPROB(suffix, dtype)                                                      \
  NEEDLE_API int32_t needle_cuda_logprob_##suffix(                                              \
      uint64_t logits, int64_t n, int64_t v, uint64_t labels, float temperature,                \
      int64_t ignore_index, uint64_t out_logprob, uint64_t out_entropy, uint64_t out_lse,       \
      int32_t device, uint64_t stream, char* err, int64_t err_len) {                            \
    return cuda_logprob(dtype, "needle_cuda_logprob_" #suffix, logits, n, v, labels,            \
                        temperature, ignore_index, out_logprob, out_entropy, out_lse, device,  \
                        stream, err, err_len);                                                  \
  }
NEEDLE_CUDA_LOGPROB(f32, NL_F32)
NEEDLE_CUDA_LOGPROB(f16, NL_F16)
NEEDLE_CUDA_LOGPROB(bf16, NL_BF16)

NEEDLE_API int64_t needle_cuda_delta_work_bytes(int64_t n) { return nl_delta_gpu_work_bytes(n); }

NEEDLE_API int64_t needle_cuda_delta_count(uint64_t old_bits, uint64_t new_bits, int64_t n,
                                           int32_t elem_size, uint64_t work, int64_t work_bytes,
                                           int32_t device, uint64_t stream, char* err,
                                           int64_t err_len) {
  size_t n_err = needle_capi_errlen(err, err_len);
  nl_delta_gpu* g;
  if (nl_delta_gpu_check("needle_cuda_delta_count", old_bits, new_bits, n, elem_size, work,
                         work_bytes, 0, 0, 0, err, n_err))
    return -1;
  if (n == 0) return 0;
  if (kernels(device, NULL, &g, err, n_err)) return -1;
  return nl_delta_gpu_count(g, old_bits, new_bits, n, elem_size, work, work_bytes, stream, err,
                            n_err);
}

NEEDLE_API int32_t needle_cuda_delta_write(uint64_t old_bits, uint64_t new_bits, int64_t n,
                                           int32_t elem_size, uint64_t work, int64_t work_bytes,
                                           uint64_t idx, int32_t idx_size, uint64_t vals,
                                           int32_t device, uint64_t stream, char* err,
                                           int64_t err_len) {
  size_t n_err = needle_capi_errlen(err, err_len);
  nl_delta_gpu* g;
  if (nl_delta_gpu_check("needle_cuda_delta_write", old_bits, new_bits, n, elem_size, work,
                         work_bytes, idx_size, idx, vals, err, n_err))
    return -1;
  if (n == 0) return 0;
  if (kernels(device, NULL, &g, err, n_err)) return -1;
  return nl_delta_gpu_write(g, old_bits, new_bits, n, elem_size, work, work_bytes, idx, idx_size,
                            vals, stream, err, n_err)
             ? -1
             : 0;
}
