// host.h: needle's one CUDA host core, plain C11 (dlopen and pthreads only). It opens the CUDA
// driver (libcuda.so.1, or NEEDLE_CUDA_LIB) and cuBLAS at run time, so whatever links it builds
// and loads without CUDA; it holds devices (each in its primary context, pushed current for
// every call and popped after, so the calling thread's context state is left as it was), loads
// kernel images (nvcc's fatbin, else clang's PTX; NEEDLE_CUDA_IMAGE; the driver's JIT logs in a
// refusal's error) and launches kernels. Package cuda (Go, through cgo) and libneedle.so (capi/,
// no Go runtime) are its two users; the trainer kernels' C launchers (logprob_gpu.c, delta_gpu.c)
// call it for both.
//
// Shape as FAISS's c_api: opaque handles with a _close/_unload/_destroy for each one made, int
// status (NL_CUDA_OK or a negative NL_CUDA_*), and the error text copied into the caller's
// buffer err of n_err bytes in the same call (NULL/0: no text). Nothing aborts or exits.
//
// A device is healthy until one of its calls fails: that first error is kept, and every later
// call on the device fails with "cuda <call>: device unhealthy: <first error>" (a CUDA error
// usually leaves the context unusable; callers fall back to the CPU). A kernel image the driver
// refuses is not a device failure (NL_CUDA_REFUSED). Calls on one device are serialized by its
// mutex; devices, modules and BLAS handles are safe to use from any thread.
#ifndef NEEDLE_CUDA_HOST_H
#define NEEDLE_CUDA_HOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Statuses. NODEV: no usable CUDA here (no driver library, a driver without the calls needle
// makes, cuInit failing, no device at that ordinal); Go wraps it as cuda.ErrNoDevice.
// REFUSED: the driver refused a kernel image (not built for this GPU or driver); the device
// stays healthy. NOLIB: the library asked for (cuBLAS) could not be opened.
enum {
  NL_CUDA_OK = 0,
  NL_CUDA_ERR = -1,
  NL_CUDA_NODEV = -2,
  NL_CUDA_REFUSED = -3,
  NL_CUDA_NOLIB = -4,
};

// NL_CUDA_ERR_BYTES is enough for any error but a load's (whose JIT logs can run to
// 2 * NL_CUDA_JIT_LOG_BYTES); longer text is cut.
#define NL_CUDA_ERR_BYTES 1024
#define NL_CUDA_JIT_LOG_BYTES (16 << 10)
#define NL_CUDA_MAX_ARGS 32    // kernel parameters of one launch
#define NL_CUDA_GRID_MAX 2147483647LL  // gridDim.x

// ---- the driver ---------------------------------------------------------------------------------
// The driver is opened at the first of these calls, once per process; each returns NODEV with
// the reason ("no CUDA device: ...") where it cannot be.

// nl_cuda_device_count writes the number of visible devices (CUDA_VISIBLE_DEVICES applies).
int nl_cuda_device_count(int32_t* count, char* err, size_t n_err);
// nl_cuda_driver_version writes the newest CUDA version the driver supports (12040 is 12.4).
int nl_cuda_driver_version(int32_t* version, char* err, size_t n_err);

// ---- devices ------------------------------------------------------------------------------------
typedef struct nl_device nl_device;

// nl_device_open retains the primary context of device `ordinal` into a new handle (NODEV when
// there is none at that ordinal). nl_device_close releases it; modules, BLAS handles and memory
// of the device must be released first.
int nl_device_open(int32_t ordinal, nl_device** out, char* err, size_t n_err);
int nl_device_close(nl_device* dev, char* err, size_t n_err);
int32_t nl_device_ordinal(const nl_device* dev);
// nl_device_name is the device's marketing name ("NVIDIA H100 80GB HBM3"), owned by dev.
const char* nl_device_name(const nl_device* dev);
// nl_device_error copies the error that made dev unhealthy and returns 1, or returns 0 (healthy).
int nl_device_error(nl_device* dev, char* err, size_t n_err);

int nl_device_synchronize(nl_device* dev, char* err, size_t n_err);
int nl_device_mem_info(nl_device* dev, uint64_t* free_bytes, uint64_t* total_bytes, char* err,
                       size_t n_err);

// Device memory (addresses cross as uint64_t) and pinned, portable host memory.
int nl_device_alloc(nl_device* dev, uint64_t bytes, uint64_t* ptr, char* err, size_t n_err);
int nl_device_free(nl_device* dev, uint64_t ptr, char* err, size_t n_err);
int nl_device_host_alloc(nl_device* dev, uint64_t bytes, void** ptr, char* err, size_t n_err);
int nl_device_host_free(nl_device* dev, void* ptr, char* err, size_t n_err);

// Copies. nl_device_upload and nl_device_download return when the copy is done (the host
// memory may be reused). The _async ones are queued on stream (a CUstream; 0: the legacy default
// stream); from pageable host memory an async upload has read src when it returns.
int nl_device_upload(nl_device* dev, uint64_t dst, const void* src, uint64_t bytes, char* err,
                     size_t n_err);
int nl_device_download(nl_device* dev, void* dst, uint64_t src, uint64_t bytes, char* err,
                       size_t n_err);
int nl_device_upload_async(nl_device* dev, uint64_t dst, const void* src, uint64_t bytes,
                           uint64_t stream, char* err, size_t n_err);
int nl_device_download_async(nl_device* dev, void* dst, uint64_t src, uint64_t bytes,
                             uint64_t stream, char* err, size_t n_err);

// Streams are uint64_t handles of the caller's (a trainer's torch stream; 0: the default stream).
int nl_device_stream_synchronize(nl_device* dev, uint64_t stream, char* err, size_t n_err);

// ---- kernel images, modules, launches ------------------------------------------------------------
// nl_image is one kernel image: a fatbin (or cubin), or PTX text, which must be NUL-terminated;
// data NULL means the build did not make it. name says where it came from, for errors.
typedef struct {
  const char* name;
  const void* data;
  size_t size;
} nl_image;

typedef struct nl_module nl_module;

// nl_module_load loads one image. When the driver refuses it (REFUSED) the error carries the JIT
// compiler's error and info logs (ptxas's messages: the line, the instruction, the missing
// feature), and dev stays healthy.
int nl_module_load(nl_device* dev, nl_image image, nl_module** out, char* err, size_t n_err);

// nl_module_load_kernels loads a kernel source's images: the fatbin when there is one (machine
// code, no JIT on sm_80/sm_90), else, or when the driver refuses it, the PTX (JIT-compiled by the
// driver). NEEDLE_CUDA_IMAGE=fatbin or =ptx loads only that one (the GPU check runs every kernel
// test once with each, so the fallback runs too). *loaded_ptx is set to 0 when the fatbin
// loaded, 1 when the PTX did. The error has a line for each image tried, "<name>: <why it did
// not load>" (REFUSED when the last was refused); a device failure stops at that image.
int nl_module_load_kernels(nl_device* dev, nl_image fatbin, nl_image ptx, nl_module** out,
                           int32_t* loaded_ptx, char* err, size_t n_err);

// nl_cuda_image_choice reads NEEDLE_CUDA_IMAGE: *fatbin and *ptx say which images
// nl_module_load_kernels may load; an unknown value is an error (NL_CUDA_ERR).
int nl_cuda_image_choice(int* fatbin, int* ptx, char* err, size_t n_err);

int nl_module_unload(nl_module* mod, char* err, size_t n_err);

// nl_function is one kernel (an `extern "C" __global__` name) of a module, owned by the caller
// (valid until the module is unloaded).
typedef struct {
  nl_device* dev;
  void* fn;       // CUfunction
  char name[64];  // for errors (cut if longer)
} nl_function;

int nl_module_function(nl_module* mod, const char* name, nl_function* out, char* err,
                       size_t n_err);

// nl_function_launch queues fn on stream with a grid x block shape (x, y, z each) and no dynamic
// shared memory, and with wait != 0 waits for the device to finish it. Parameter layout: every
// kernel parameter is at most 8 bytes and sits in its own 8-byte slot of args, little-endian,
// narrower types in the low bytes (device pointers and long long as they are, int as its
// 32 bits, float as its bits: nl_cuda_arg_f32).
int nl_function_launch(const nl_function* fn, const uint32_t grid[3], const uint32_t block[3],
                       uint64_t stream, const uint64_t* args, int32_t nargs, int32_t wait,
                       char* err, size_t n_err);

static inline uint64_t nl_cuda_arg_f32(float f) {
  union {
    float f;
    uint32_t u;
  } v = {f};
  return v.u;
}
static inline uint64_t nl_cuda_arg_i32(int32_t i) { return (uint32_t)i; }

// ---- cuBLAS ----------------------------------------------------------------------------------
// nl_cublas_open opens cuBLAS from path (a file or a soname the loader resolves) and binds the
// calls needle makes, once per process: after the first success it returns OK without opening
// anything. NOLIB: dlopen failed (the text is dlerror's); ERR: the library lacks a call.
// Where to look is the caller's choice (package cuda searches CUDA installs and pip wheels).
int nl_cublas_open(const char* path, char* err, size_t n_err);

typedef struct nl_blas nl_blas;

// A cuBLAS handle on dev (cublasCreate); its calls run under the device's rules above.
int nl_blas_create(nl_device* dev, nl_blas** out, char* err, size_t n_err);
int nl_blas_destroy(nl_blas* blas, char* err, size_t n_err);

// nl_blas_gemm_ex: C = alpha*op(A)*op(B) + beta*C, column-major, op(A) m x k, op(B) k x n;
// A and B of cudaDataType in_type (0: fp32, 2: fp16), C fp32, fp32 accumulation
// (CUBLAS_COMPUTE_32F, the default algorithm); queued on the handle's stream.
int nl_blas_gemm_ex(nl_blas* blas, int32_t op_a, int32_t op_b, int32_t m, int32_t n, int32_t k,
                    float alpha, uint64_t a, int32_t lda, uint64_t b, int32_t ldb, int32_t in_type,
                    float beta, uint64_t c, int32_t ldc, char* err, size_t n_err);

// nl_cublas_status_name is cublasStatus_t's name ("CUBLAS_STATUS_INVALID_VALUE"), or NULL.
const char* nl_cublas_status_name(int32_t status);

#ifdef __cplusplus
}
#endif

#endif
