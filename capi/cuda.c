// libneedle.so's CUDA entry points: logprob.cu and delta.cu on device memory the caller owns
// (a trainer's torch tensors), queued on the caller's stream. The CUDA driver (libcuda.so.1) is
// opened at the first call, as package cuda does for Go, so the library builds and loads
// without CUDA; the kernel images (nvcc's fatbin when `make native` had nvcc, clang's PTX
// always) are linked into the library by capi_images.c.
//
// Work runs in the device's primary context, the one the CUDA runtime and PyTorch use, pushed
// current for the call and popped after, so the caller's own context state is left as it was.
// Per device, the context and the loaded modules are made once (under a mutex) and kept for
// the life of the process.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_internal.h"
#include "needle.h"

typedef int CUresult;  // the driver API's types, as cuda.h declares them
typedef void* CUcontext;
typedef void* CUmodule;
typedef void* CUfunction;
typedef void* CUstream;

static struct {
  CUresult (*init)(unsigned);
  CUresult (*device_get_count)(int*);
  CUresult (*device_get)(int*, int);
  CUresult (*primary_ctx_retain)(CUcontext*, int);
  CUresult (*ctx_push)(CUcontext);
  CUresult (*ctx_pop)(CUcontext*);
  CUresult (*module_load_data_ex)(CUmodule*, const void*, unsigned, int*, void**);
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*);
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, CUstream, void**, void**);
  CUresult (*memcpy_dtoh_async)(void*, uint64_t, size_t, CUstream);
  CUresult (*memcpy_htod_async)(uint64_t, const void*, size_t, CUstream);
  CUresult (*stream_synchronize)(CUstream);
  CUresult (*get_error_string)(CUresult, const char**);
} drv;

static pthread_once_t drv_once = PTHREAD_ONCE_INIT;
static char drv_err[512];  // empty once the driver is usable

static void load_driver(void) {
  const char* path = getenv("NEEDLE_CUDA_LIB");  // as package cuda (cuda.LibraryEnv)
  if (!path || !*path) path = "libcuda.so.1";
  void* h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    snprintf(drv_err, sizeof drv_err, "no CUDA device: cannot load the CUDA driver: %s", dlerror());
    return;
  }
  struct {
    void** fn;
    const char* name;
  } syms[] = {
      {(void**)&drv.init, "cuInit"},
      {(void**)&drv.device_get_count, "cuDeviceGetCount"},
      {(void**)&drv.device_get, "cuDeviceGet"},
      {(void**)&drv.primary_ctx_retain, "cuDevicePrimaryCtxRetain"},
      {(void**)&drv.ctx_push, "cuCtxPushCurrent_v2"},
      {(void**)&drv.ctx_pop, "cuCtxPopCurrent_v2"},
      {(void**)&drv.module_load_data_ex, "cuModuleLoadDataEx"},
      {(void**)&drv.module_get_function, "cuModuleGetFunction"},
      {(void**)&drv.launch_kernel, "cuLaunchKernel"},
      {(void**)&drv.memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2"},
      {(void**)&drv.memcpy_htod_async, "cuMemcpyHtoDAsync_v2"},
      {(void**)&drv.stream_synchronize, "cuStreamSynchronize"},
      {(void**)&drv.get_error_string, "cuGetErrorString"},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    *syms[i].fn = dlsym(h, syms[i].name);
    if (!*syms[i].fn) {
      snprintf(drv_err, sizeof drv_err, "no CUDA device: %s has no %s (driver too old?)", path,
               syms[i].name);
      return;
    }
  }
  CUresult rc = drv.init(0);
  if (rc != 0) {
    const char* s = NULL;
    drv.get_error_string(rc, &s);
    snprintf(drv_err, sizeof drv_err, "no CUDA device: cuInit: %s (CUDA error %d)", s ? s : "?", rc);
  }
}

// cuda_fail writes "<what>: <CUDA error text> (CUDA error rc)" into err and returns -1.
static int cuda_fail(CUresult rc, const char* what, char* err, size_t n_err) {
  const char* s = NULL;
  if (drv.get_error_string(rc, &s) != 0) s = NULL;
  if (n_err > 0) snprintf(err, n_err, "%s: %s (CUDA error %d)", what, s ? s : "unknown", rc);
  return -1;
}

// The kernels each entry point launches, by the names logprob.cu and delta.cu give them (each
// delta write kernel right after its count kernel).
enum {
  K_LOGPROB_F32, K_LOGPROB_F16, K_LOGPROB_BF16,
  K_DELTA_COUNT16, K_DELTA_WRITE16, K_DELTA_COUNT32, K_DELTA_WRITE32, K_COUNT
};
static const struct {
  int image;  // NL_IMAGE_LOGPROB or NL_IMAGE_DELTA
  const char* name;
} kernels[K_COUNT] = {
    {NL_IMAGE_LOGPROB, "nl_cuda_logprob_f32"}, {NL_IMAGE_LOGPROB, "nl_cuda_logprob_f16"},
    {NL_IMAGE_LOGPROB, "nl_cuda_logprob_bf16"}, {NL_IMAGE_DELTA, "nl_cuda_delta_count16"},
    {NL_IMAGE_DELTA, "nl_cuda_delta_write16"}, {NL_IMAGE_DELTA, "nl_cuda_delta_count32"},
    {NL_IMAGE_DELTA, "nl_cuda_delta_write32"},
};

#define MAX_DEVICES 64
static struct {
  int ready;  // 1 once ctx and fn are set
  CUcontext ctx;
  CUfunction fn[K_COUNT];
} devices[MAX_DEVICES];
static pthread_mutex_t devices_mu = PTHREAD_MUTEX_INITIALIZER;

// load_image loads one of the kernel images into the current context: the fatbin, else (or
// when the driver refuses it, or NEEDLE_CUDA_IMAGE=ptx) the PTX, as cuda.LoadKernels does. A
// refusal's message carries the driver's JIT error log.
static int load_image(int image, CUmodule* mod, char* err, size_t n_err) {
  const char* want = getenv("NEEDLE_CUDA_IMAGE");  // cuda.ImageEnv
  nl_image fat = nl_capi_image(image, 1), ptx = nl_capi_image(image, 0);
  char log[4096] = "";
  int opts[] = {5 /* CU_JIT_ERROR_LOG_BUFFER */, 6 /* ..._SIZE_BYTES */};
  for (int pass = 0; pass < 2; pass++) {
    nl_image im = pass == 0 ? fat : ptx;
    if (!im.data || (want && !strcmp(want, pass == 0 ? "ptx" : "fatbin"))) continue;
    void* vals[] = {log, (void*)(uintptr_t)sizeof log};
    CUresult rc = drv.module_load_data_ex(mod, im.data, 2, opts, vals);
    if (rc == 0) return 0;
    const char* s = NULL;
    drv.get_error_string(rc, &s);
    if (n_err > 0)
      snprintf(err, n_err, "load %s: %s (CUDA error %d); JIT error log: %s", im.name,
               s ? s : "unknown", rc, log);
    if (rc != 200 && rc != 209 && rc != 218 && rc != 222) return -1;  // not a refused image
  }
  if (!fat.data && !ptx.data && n_err > 0) snprintf(err, n_err, "no kernel image linked in");
  return -1;
}

// enter makes device's primary context current (pushed: leave() pops it), loading the kernels
// the first time. Returns 0, or -1 with the reason in err.
static int enter(int32_t device, char* err, size_t n_err) {
  pthread_once(&drv_once, load_driver);
  if (drv_err[0]) {
    if (n_err > 0) snprintf(err, n_err, "%s", drv_err);
    return -1;
  }
  int count = 0;
  CUresult rc = drv.device_get_count(&count);
  if (rc != 0) return cuda_fail(rc, "cuDeviceGetCount", err, n_err);
  if (device < 0 || device >= count || device >= MAX_DEVICES) {
    if (n_err > 0) snprintf(err, n_err, "no CUDA device %d (%d visible)", device, count);
    return -1;
  }
  pthread_mutex_lock(&devices_mu);
  int ok = devices[device].ready;
  if (!ok) {
    int dev;
    CUcontext ctx;
    if ((rc = drv.device_get(&dev, device)) != 0 || (rc = drv.primary_ctx_retain(&ctx, dev)) != 0) {
      pthread_mutex_unlock(&devices_mu);
      return cuda_fail(rc, "cuDeviceGet/cuDevicePrimaryCtxRetain", err, n_err);
    }
    devices[device].ctx = ctx;
  }
  rc = drv.ctx_push(devices[device].ctx);
  if (rc != 0) {
    pthread_mutex_unlock(&devices_mu);
    return cuda_fail(rc, "cuCtxPushCurrent", err, n_err);
  }
  if (!ok) {
    CUmodule mods[2];
    int failed = load_image(NL_IMAGE_LOGPROB, &mods[0], err, n_err) ||
                 load_image(NL_IMAGE_DELTA, &mods[1], err, n_err);
    for (int k = 0; k < K_COUNT && !failed; k++) {
      rc = drv.module_get_function(&devices[device].fn[k], mods[kernels[k].image], kernels[k].name);
      if (rc != 0) failed = cuda_fail(rc, kernels[k].name, err, n_err);
    }
    if (failed) {
      CUcontext popped;
      drv.ctx_pop(&popped);
      pthread_mutex_unlock(&devices_mu);
      return -1;
    }
    devices[device].ready = 1;
  }
  pthread_mutex_unlock(&devices_mu);
  return 0;
}

static void leave(void) {
  CUcontext popped;
  drv.ctx_pop(&popped);
}

// launch queues kernel k on stream with a grid of blocks x 256 threads (every kernel here runs
// blocks of 256: logprob.cu's NL_CUDA_BLOCK, delta.cu's tile).
static int launch(int32_t device, int k, uint64_t blocks, CUstream stream, void** params, char* err,
                  size_t n_err) {
  CUresult rc = drv.launch_kernel(devices[device].fn[k], (unsigned)blocks, 1, 1, 256, 1, 1, 0,
                                  stream, params, NULL);
  return rc == 0 ? 0 : cuda_fail(rc, kernels[k].name, err, n_err);
}

#define GRID_MAX 2147483647LL  // gridDim.x
#define DELTA_TILE (256 * 8)   // elements per block of delta.cu (blockDim.x * NL_DELTA_ITEMS)

static int32_t cuda_logprob(int k, const char* name, uint64_t logits, int64_t n, int64_t v,
                            uint64_t labels, float temperature, int64_t ignore_index,
                            uint64_t out_logprob, uint64_t out_entropy, uint64_t out_lse,
                            int32_t device, uint64_t stream, char* err, int64_t err_len) {
  size_t n_err = needle_capi_errlen(err, err_len);
  if (n < 0 || n > GRID_MAX || v < 1 || (n > 0 && (!logits || !labels || !out_logprob)) ||
      !(temperature > 0) || temperature == __builtin_inff()) {
    if (n_err > 0)
      snprintf(err, n_err,
               "%s: need 0 <= n <= 2^31-1, v >= 1, logits, labels and out_logprob, and a finite "
               "temperature > 0 (n=%lld v=%lld temperature=%g)",
               name, (long long)n, (long long)v, temperature);
    return -1;
  }
  if (enter(device, err, n_err) != 0) return -1;
  int rc = 0;
  if (n > 0) {
    float inv_t = 1.0f / temperature;
    long long vv = v, ig = ignore_index;
    void* params[] = {&logits, &vv, &labels, &inv_t, &ig, &out_logprob, &out_entropy, &out_lse};
    rc = launch(device, k, (uint64_t)n, (CUstream)(uintptr_t)stream, params, err, n_err);
  }
  leave();
  return rc;
}

#define NEEDLE_CUDA_LOGPROB(suffix, k)                                                          \
  NEEDLE_API int32_t needle_cuda_logprob_##suffix(                                              \
      uint64_t logits, int64_t n, int64_t v, uint64_t labels, float temperature,                \
      int64_t ignore_index, uint64_t out_logprob, uint64_t out_entropy, uint64_t out_lse,       \
      int32_t device, uint64_t stream, char* err, int64_t err_len) {                            \
    return cuda_logprob(k, "needle_cuda_logprob_" #suffix, logits, n, v, labels, temperature,   \
                        ignore_index, out_logprob, out_entropy, out_lse, device, stream, err,  \
                        err_len);                                                               \
  }
NEEDLE_CUDA_LOGPROB(f32, K_LOGPROB_F32)
NEEDLE_CUDA_LOGPROB(f16, K_LOGPROB_F16)
NEEDLE_CUDA_LOGPROB(bf16, K_LOGPROB_BF16)

// The work buffer of a delta encode: the tiles' change counts (u32), then their exclusive
// prefix sums (u64, 8-byte aligned), which needle_cuda_delta_write reads.
static int64_t delta_tiles(int64_t n) { return (n + DELTA_TILE - 1) / DELTA_TILE; }
static int64_t delta_offsets_at(int64_t n) { return (4 * delta_tiles(n) + 7) / 8 * 8; }

NEEDLE_API int64_t needle_cuda_delta_work_bytes(int64_t n) {
  return n < 0 ? -1 : delta_offsets_at(n) + 8 * delta_tiles(n);
}

// delta_begin checks the arguments of count (idx_size 0: no outputs) or write, and enters the
// device when there is work: 1 when entered (leave() after), 0 when n is 0, -1 on error. k is
// the count kernel of the element size (its write kernel is k + 1).
static int delta_begin(const char* name, uint64_t old_bits, uint64_t new_bits, int64_t n,
                       int32_t elem_size, uint64_t work, int64_t work_bytes, int32_t idx_size,
                       uint64_t idx, uint64_t vals, int32_t device, int* k, char* err,
                       size_t n_err) {
  if (n < 0 || (elem_size != 2 && elem_size != 4) || delta_tiles(n) > GRID_MAX ||
      (n > 0 && (!old_bits || !new_bits || !work)) || work_bytes < needle_cuda_delta_work_bytes(n)) {
    if (n_err > 0)
      snprintf(err, n_err,
               "%s: need n >= 0 elements of 2 or 4 bytes, both tensors and a work buffer of "
               "needle_cuda_delta_work_bytes(n) = %lld bytes (n=%lld elem_size=%d work_bytes=%lld)",
               name, (long long)needle_cuda_delta_work_bytes(n), (long long)n, elem_size,
               (long long)work_bytes);
    return -1;
  }
  if (idx_size != 0 && ((idx_size != 4 && idx_size != 8) || (idx_size == 4 && n > 0xffffffffLL) ||
                        (n > 0 && (!idx || !vals)))) {
    if (n_err > 0)
      snprintf(err, n_err,
               "%s: need idx and vals, and idx_size 4 (n <= 2^32-1) or 8 (idx_size=%d n=%lld)",
               name, idx_size, (long long)n);
    return -1;
  }
  *k = elem_size == 2 ? K_DELTA_COUNT16 : K_DELTA_COUNT32;
  if (n == 0) return 0;
  return enter(device, err, n_err) == 0 ? 1 : -1;
}

NEEDLE_API int64_t needle_cuda_delta_count(uint64_t old_bits, uint64_t new_bits, int64_t n,
                                           int32_t elem_size, uint64_t work, int64_t work_bytes,
                                           int32_t device, uint64_t stream, char* err,
                                           int64_t err_len) {
  size_t n_err = needle_capi_errlen(err, err_len);
  int k, st = delta_begin("needle_cuda_delta_count", old_bits, new_bits, n, elem_size, work,
                          work_bytes, 0, 0, 0, device, &k, err, n_err);
  if (st <= 0) return st;
  CUstream s = (CUstream)(uintptr_t)stream;
  int64_t tiles = delta_tiles(n), total = -1;
  uint32_t* counts = malloc(4 * (size_t)tiles);
  uint64_t* offsets = malloc(8 * (size_t)tiles);
  long long nn = n;
  uint64_t offsets_dev = work + (uint64_t)delta_offsets_at(n);
  void* params[] = {&old_bits, &new_bits, &nn, &work};
  CUresult rc;
  if (!counts || !offsets) {
    if (n_err > 0) snprintf(err, n_err, "needle_cuda_delta_count: out of host memory");
  } else if (launch(device, k, (uint64_t)tiles, s, params, err, n_err) == 0) {
    // Counts -> exclusive prefix sums on the host (tiles is n / 2048, small next to n), as
    // kernels/trainer/delta/gpu.go does; the upload is queued before write's launch.
    if ((rc = drv.memcpy_dtoh_async(counts, work, 4 * (size_t)tiles, s)) != 0 ||
        (rc = drv.stream_synchronize(s)) != 0) {
      cuda_fail(rc, "needle_cuda_delta_count: reading the tile counts", err, n_err);
    } else {
      uint64_t sum = 0;
      for (int64_t t = 0; t < tiles; t++) offsets[t] = sum, sum += counts[t];
      // From pageable memory the copy has read offsets when it returns.
      if ((rc = drv.memcpy_htod_async(offsets_dev, offsets, 8 * (size_t)tiles, s)) != 0)
        cuda_fail(rc, "needle_cuda_delta_count: writing the tile offsets", err, n_err);
      else
        total = (int64_t)sum;
    }
  }
  free(counts);
  free(offsets);
  leave();
  return total;
}

NEEDLE_API int32_t needle_cuda_delta_write(uint64_t old_bits, uint64_t new_bits, int64_t n,
                                           int32_t elem_size, uint64_t work, int64_t work_bytes,
                                           uint64_t idx, int32_t idx_size, uint64_t vals,
                                           int32_t device, uint64_t stream, char* err,
                                           int64_t err_len) {
  size_t n_err = needle_capi_errlen(err, err_len);
  int k, st = delta_begin("needle_cuda_delta_write", old_bits, new_bits, n, elem_size, work,
                          work_bytes, idx_size, idx, vals, device, &k, err, n_err);
  if (st <= 0) return st;
  long long nn = n;
  int is = idx_size;
  uint64_t offsets_dev = work + (uint64_t)delta_offsets_at(n);
  void* params[] = {&old_bits, &new_bits, &nn, &offsets_dev, &idx, &is, &vals};
  int rc = launch(device, k + 1, (uint64_t)delta_tiles(n), (CUstream)(uintptr_t)stream, params,
                  err, n_err);
  leave();
  return rc;
}
