// host.c: the CUDA host core of host.h. Compiled into package cuda by cgo and into libneedle.so
// by capi/CMakeLists.txt; plain C11 with dlopen and pthreads only.
#define _POSIX_C_SOURCE 200809L
#include "host.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;  // the driver API's types, as cuda.h declares them (CUDA_SUCCESS is 0)
typedef void* CUcontext;
typedef void* CUmodule;
typedef void* CUfunction;
typedef void* CUstream;
typedef unsigned long long CUdeviceptr;

// The driver's entry points (versioned names as cuda.h maps them), bound once per process.
static struct {
  CUresult (*init)(unsigned);
  CUresult (*driver_get_version)(int*);
  CUresult (*device_get_count)(int*);
  CUresult (*device_get)(int*, int);
  CUresult (*device_get_name)(char*, int, int);
  CUresult (*primary_ctx_retain)(CUcontext*, int);
  CUresult (*primary_ctx_release)(int);
  CUresult (*ctx_push)(CUcontext);
  CUresult (*ctx_pop)(CUcontext*);
  CUresult (*ctx_synchronize)(void);
  CUresult (*module_load_data_ex)(CUmodule*, const void*, unsigned, int*, void**);
  CUresult (*module_unload)(CUmodule);
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*);
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, CUstream, void**, void**);
  CUresult (*mem_alloc)(CUdeviceptr*, size_t);
  CUresult (*mem_free)(CUdeviceptr);
  CUresult (*mem_host_alloc)(void**, size_t, unsigned);
  CUresult (*mem_free_host)(void*);
  CUresult (*mem_get_info)(size_t*, size_t*);
  CUresult (*memcpy_htod)(CUdeviceptr, const void*, size_t);
  CUresult (*memcpy_dtoh)(void*, CUdeviceptr, size_t);
  CUresult (*memcpy_htod_async)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*memcpy_dtoh_async)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*stream_synchronize)(CUstream);
  CUresult (*get_error_string)(CUresult, const char**);
} drv;

static pthread_once_t drv_once = PTHREAD_ONCE_INIT;
static char drv_err[512];  // why the driver is unusable; empty once it is usable

// put writes printf-style text into err (n_err bytes; nothing when NULL or 0).
static void put(char* err, size_t n_err, const char* fmt, ...) {
  if (!err || n_err == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n_err, fmt, ap);
  va_end(ap);
}

// describe writes a CUresult as "<driver's text> (CUDA error N)" into buf.
static const char* describe(CUresult rc, char* buf, size_t n) {
  const char* s = NULL;
  if (drv.get_error_string == NULL || drv.get_error_string(rc, &s) != 0) s = NULL;
  if (s)
    snprintf(buf, n, "%s (CUDA error %d)", s, rc);
  else
    snprintf(buf, n, "CUDA error %d", rc);
  return buf;
}

typedef struct {
  void** fn;
  const char* name;
} symbol;

// bind resolves every symbol in the library handle h; returns the first missing name, or NULL.
static const char* bind(void* h, const symbol* syms, size_t n) {
  for (size_t i = 0; i < n; i++) {
    *syms[i].fn = dlsym(h, syms[i].name);
    if (!*syms[i].fn) return syms[i].name;
  }
  return NULL;
}

static void load_driver(void) {
  const char* path = getenv("NEEDLE_CUDA_LIB");
  if (!path || !*path) path = "libcuda.so.1";
  void* h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    snprintf(drv_err, sizeof drv_err, "no CUDA device: cannot load the CUDA driver: %s", dlerror());
    return;
  }
  const symbol syms[] = {
      {(void**)&drv.init, "cuInit"},
      {(void**)&drv.driver_get_version, "cuDriverGetVersion"},
      {(void**)&drv.device_get_count, "cuDeviceGetCount"},
      {(void**)&drv.device_get, "cuDeviceGet"},
      {(void**)&drv.device_get_name, "cuDeviceGetName"},
      {(void**)&drv.primary_ctx_retain, "cuDevicePrimaryCtxRetain"},
      {(void**)&drv.primary_ctx_release, "cuDevicePrimaryCtxRelease_v2"},
      {(void**)&drv.ctx_push, "cuCtxPushCurrent_v2"},
      {(void**)&drv.ctx_pop, "cuCtxPopCurrent_v2"},
      {(void**)&drv.ctx_synchronize, "cuCtxSynchronize"},
      {(void**)&drv.module_load_data_ex, "cuModuleLoadDataEx"},
      {(void**)&drv.module_unload, "cuModuleUnload"},
      {(void**)&drv.module_get_function, "cuModuleGetFunction"},
      {(void**)&drv.launch_kernel, "cuLaunchKernel"},
      {(void**)&drv.mem_alloc, "cuMemAlloc_v2"},
      {(void**)&drv.mem_free, "cuMemFree_v2"},
      {(void**)&drv.mem_host_alloc, "cuMemHostAlloc"},
      {(void**)&drv.mem_free_host, "cuMemFreeHost"},
      {(void**)&drv.mem_get_info, "cuMemGetInfo_v2"},
      {(void**)&drv.memcpy_htod, "cuMemcpyHtoD_v2"},
      {(void**)&drv.memcpy_dtoh, "cuMemcpyDtoH_v2"},
      {(void**)&drv.memcpy_htod_async, "cuMemcpyHtoDAsync_v2"},
      {(void**)&drv.memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2"},
      {(void**)&drv.stream_synchronize, "cuStreamSynchronize"},
      {(void**)&drv.get_error_string, "cuGetErrorString"},
  };
  const char* missing = bind(h, syms, sizeof syms / sizeof syms[0]);
  if (missing) {
    memset(&drv, 0, sizeof drv);
    snprintf(drv_err, sizeof drv_err, "no CUDA device: %s has no %s (driver too old?)", path,
             missing);
    return;
  }
  CUresult rc = drv.init(0);
  if (rc != 0) {
    char why[160];
    snprintf(drv_err, sizeof drv_err, "no CUDA device: cuInit: %s", describe(rc, why, sizeof why));
  }
}

// driver opens the driver once; NL_CUDA_NODEV with the reason when it is unusable.
static int driver(char* err, size_t n_err) {
  pthread_once(&drv_once, load_driver);
  if (drv_err[0]) {
    put(err, n_err, "%s", drv_err);
    return NL_CUDA_NODEV;
  }
  return NL_CUDA_OK;
}

// driver_int runs a driver query that writes one int (cuDeviceGetCount, cuDriverGetVersion).
static int driver_int(CUresult (**fn)(int*), const char* call, int32_t* out, char* err,
                      size_t n_err) {
  int st = driver(err, n_err);
  if (st) return st;
  int v = 0;
  CUresult rc = (*fn)(&v);
  if (rc != 0) {
    char why[160];
    put(err, n_err, "no CUDA device: %s: %s", call, describe(rc, why, sizeof why));
    return NL_CUDA_NODEV;
  }
  *out = v;
  return NL_CUDA_OK;
}

int nl_cuda_device_count(int32_t* count, char* err, size_t n_err) {
  return driver_int(&drv.device_get_count, "cuDeviceGetCount", count, err, n_err);
}

int nl_cuda_driver_version(int32_t* version, char* err, size_t n_err) {
  return driver_int(&drv.driver_get_version, "cuDriverGetVersion", version, err, n_err);
}

// ---- devices --------------------------------------------------------------------------------

struct nl_device {
  int32_t ordinal;
  int cu_device;
  CUcontext ctx;  // the primary context, retained
  char name[128];
  pthread_mutex_t mu;               // serializes the device's calls; guards failed
  char failed[NL_CUDA_ERR_BYTES];  // the first failure; empty while the device is healthy
};

// fail_locked records msg as dev's first failure (under dev->mu) and copies it to err.
static void fail_locked(nl_device* dev, const char* msg, char* err, size_t n_err) {
  if (!dev->failed[0]) snprintf(dev->failed, sizeof dev->failed, "%s", msg);
  put(err, n_err, "%s", msg);
}

// begin starts a call on dev: takes its mutex, refuses when the device is unhealthy and pushes
// its context current on this thread. On success the caller must call end (or end_text).
// dev NULL is refused.
static int begin(nl_device* dev, const char* what, char* err, size_t n_err) {
  if (!dev) {  // package cuda passes NULL for a closed Device
    put(err, n_err, "cuda %s: device closed", what);
    return NL_CUDA_ERR;
  }
  pthread_mutex_lock(&dev->mu);
  if (dev->failed[0]) {
    put(err, n_err, "cuda %s: device unhealthy: %s", what, dev->failed);
    pthread_mutex_unlock(&dev->mu);
    return NL_CUDA_ERR;
  }
  CUresult rc = drv.ctx_push(dev->ctx);
  if (rc != 0) {
    char why[160], msg[NL_CUDA_ERR_BYTES];
    snprintf(msg, sizeof msg, "cuda %s: set context: %s", what, describe(rc, why, sizeof why));
    fail_locked(dev, msg, err, n_err);
    pthread_mutex_unlock(&dev->mu);
    return NL_CUDA_ERR;
  }
  return NL_CUDA_OK;
}

// end_text finishes a call begun by begin: pops the context, and a non-NULL msg marks the
// device unhealthy and is the call's error.
static int end_text(nl_device* dev, const char* msg, char* err, size_t n_err) {
  CUcontext popped;
  drv.ctx_pop(&popped);
  if (msg) fail_locked(dev, msg, err, n_err);
  pthread_mutex_unlock(&dev->mu);
  return msg ? NL_CUDA_ERR : NL_CUDA_OK;
}

// end is end_text for a driver call's result: "cuda <what>: <rc's text>" when rc failed.
static int end(nl_device* dev, const char* what, CUresult rc, char* err, size_t n_err) {
  if (rc == 0) return end_text(dev, NULL, err, n_err);
  char why[160], msg[NL_CUDA_ERR_BYTES];
  snprintf(msg, sizeof msg, "cuda %s: %s", what, describe(rc, why, sizeof why));
  return end_text(dev, msg, err, n_err);
}

int nl_device_open(int32_t ordinal, nl_device** out, char* err, size_t n_err) {
  int32_t count;
  int st = nl_cuda_device_count(&count, err, n_err);
  if (st) return st;
  if (ordinal < 0 || ordinal >= count) {
    put(err, n_err, "no CUDA device: device %d requested, %d present", ordinal, count);
    return NL_CUDA_NODEV;
  }
  char why[160];
  int cu_device;
  CUresult rc = drv.device_get(&cu_device, ordinal);
  if (rc != 0) {
    put(err, n_err, "no CUDA device: cuDeviceGet(%d): %s", ordinal, describe(rc, why, sizeof why));
    return NL_CUDA_NODEV;
  }
  nl_device* dev = calloc(1, sizeof *dev);
  if (!dev) {
    put(err, n_err, "cuda open device %d: out of host memory", ordinal);
    return NL_CUDA_ERR;
  }
  if (drv.device_get_name(dev->name, (int)sizeof dev->name - 1, cu_device) != 0) dev->name[0] = 0;
  rc = drv.primary_ctx_retain(&dev->ctx, cu_device);
  if (rc != 0) {
    free(dev);
    put(err, n_err, "no CUDA device: cuDevicePrimaryCtxRetain: %s", describe(rc, why, sizeof why));
    return NL_CUDA_NODEV;
  }
  dev->ordinal = ordinal;
  dev->cu_device = cu_device;
  pthread_mutex_init(&dev->mu, NULL);
  *out = dev;
  return NL_CUDA_OK;
}

int nl_device_close(nl_device* dev, char* err, size_t n_err) {
  pthread_mutex_lock(&dev->mu);
  CUresult rc = drv.primary_ctx_release(dev->cu_device);
  pthread_mutex_unlock(&dev->mu);
  pthread_mutex_destroy(&dev->mu);
  free(dev);
  if (rc != 0) {
    char why[160];
    put(err, n_err, "cuda release context: %s", describe(rc, why, sizeof why));
    return NL_CUDA_ERR;
  }
  return NL_CUDA_OK;
}

int32_t nl_device_ordinal(const nl_device* dev) { return dev->ordinal; }
const char* nl_device_name(const nl_device* dev) { return dev->name; }

int nl_device_error(nl_device* dev, char* err, size_t n_err) {
  pthread_mutex_lock(&dev->mu);
  int failed = dev->failed[0] != 0;
  if (failed) put(err, n_err, "%s", dev->failed);
  pthread_mutex_unlock(&dev->mu);
  return failed;
}

int nl_device_synchronize(nl_device* dev, char* err, size_t n_err) {
  if (begin(dev, "synchronize", err, n_err)) return NL_CUDA_ERR;
  return end(dev, "synchronize", drv.ctx_synchronize(), err, n_err);
}

int nl_device_mem_info(nl_device* dev, uint64_t* free_bytes, uint64_t* total_bytes, char* err,
                       size_t n_err) {
  if (begin(dev, "mem get info", err, n_err)) return NL_CUDA_ERR;
  size_t f = 0, t = 0;
  CUresult rc = drv.mem_get_info(&f, &t);
  *free_bytes = f, *total_bytes = t;
  return end(dev, "mem get info", rc, err, n_err);
}

int nl_device_alloc(nl_device* dev, uint64_t bytes, uint64_t* ptr, char* err, size_t n_err) {
  if (begin(dev, "alloc", err, n_err)) return NL_CUDA_ERR;
  CUdeviceptr p = 0;
  CUresult rc = drv.mem_alloc(&p, bytes ? bytes : 1);
  *ptr = p;
  return end(dev, "alloc", rc, err, n_err);
}

int nl_device_free(nl_device* dev, uint64_t ptr, char* err, size_t n_err) {
  if (begin(dev, "free", err, n_err)) return NL_CUDA_ERR;
  return end(dev, "free", drv.mem_free(ptr), err, n_err);
}

int nl_device_host_alloc(nl_device* dev, uint64_t bytes, void** ptr, char* err, size_t n_err) {
  if (begin(dev, "host alloc", err, n_err)) return NL_CUDA_ERR;
  const unsigned portable = 1;  // CU_MEMHOSTALLOC_PORTABLE: usable with every device
  return end(dev, "host alloc", drv.mem_host_alloc(ptr, bytes ? bytes : 1, portable), err, n_err);
}

int nl_device_host_free(nl_device* dev, void* ptr, char* err, size_t n_err) {
  if (begin(dev, "host free", err, n_err)) return NL_CUDA_ERR;
  return end(dev, "host free", drv.mem_free_host(ptr), err, n_err);
}

int nl_device_upload(nl_device* dev, uint64_t dst, const void* src, uint64_t bytes, char* err,
                     size_t n_err) {
  if (bytes == 0) return NL_CUDA_OK;
  if (begin(dev, "upload", err, n_err)) return NL_CUDA_ERR;
  return end(dev, "upload", drv.memcpy_htod(dst, src, bytes), err, n_err);
}

int nl_device_download(nl_device* dev, void* dst, uint64_t src, uint64_t bytes, char* err,
                       size_t n_err) {
  if (bytes == 0) return NL_CUDA_OK;
  if (begin(dev, "download", err, n_err)) return NL_CUDA_ERR;
  return end(dev, "download", drv.memcpy_dtoh(dst, src, bytes), err, n_err);
}

int nl_device_upload_async(nl_device* dev, uint64_t dst, const void* src, uint64_t bytes,
                           uint64_t stream, char* err, size_t n_err) {
  if (bytes == 0) return NL_CUDA_OK;
  if (begin(dev, "upload", err, n_err)) return NL_CUDA_ERR;
  CUresult rc = drv.memcpy_htod_async(dst, src, bytes, (CUstream)(uintptr_t)stream);
  return end(dev, "upload", rc, err, n_err);
}

int nl_device_download_async(nl_device* dev, void* dst, uint64_t src, uint64_t bytes,
                             uint64_t stream, char* err, size_t n_err) {
  if (bytes == 0) return NL_CUDA_OK;
  if (begin(dev, "download", err, n_err)) return NL_CUDA_ERR;
  CUresult rc = drv.memcpy_dtoh_async(dst, src, bytes, (CUstream)(uintptr_t)stream);
  return end(dev, "download", rc, err, n_err);
}

int nl_device_stream_synchronize(nl_device* dev, uint64_t stream, char* err, size_t n_err) {
  if (begin(dev, "stream synchronize", err, n_err)) return NL_CUDA_ERR;
  CUresult rc = drv.stream_synchronize((CUstream)(uintptr_t)stream);
  return end(dev, "stream synchronize", rc, err, n_err);
}

// ---- modules and launches ---------------------------------------------------------------------

struct nl_module {
  nl_device* dev;
  CUmodule h;
};

// refused reports whether a load's CUresult means the image does not suit this device or
// driver (the device itself is fine).
static int refused(CUresult rc) {
  switch (rc) {
    case 200:  // CUDA_ERROR_INVALID_IMAGE
    case 209:  // CUDA_ERROR_NO_BINARY_FOR_GPU
    case 218:  // CUDA_ERROR_INVALID_PTX
    case 221:  // CUDA_ERROR_JIT_COMPILER_NOT_FOUND
    case 222:  // CUDA_ERROR_UNSUPPORTED_PTX_VERSION
      return 1;
  }
  return 0;
}

// quote writes log (at most n bytes, up to its first NUL: the length the driver reports
// written may count the NUL) to out as a double-quoted string, escaping quotes, backslashes and
// control bytes; returns the bytes written (out is NUL-terminated within cap > 0).
static size_t quote(char* out, size_t cap, const char* log, size_t n) {
  size_t w = 0;
  char esc[8];
  out[w++] = '"';
  for (size_t i = 0; i < n && log[i] && w + 1 < cap; i++) {
    unsigned char c = (unsigned char)log[i];
    const char* s = esc;
    if (c == '"' || c == '\\')
      snprintf(esc, sizeof esc, "\\%c", c);
    else if (c == '\n')
      s = "\\n";
    else if (c == '\t')
      s = "\\t";
    else if (c < 0x20 || c == 0x7f)
      snprintf(esc, sizeof esc, "\\x%02x", c);
    else
      esc[0] = (char)c, esc[1] = 0;
    for (; *s && w + 1 < cap; s++) out[w++] = *s;
  }
  if (w + 1 < cap) out[w++] = '"';
  out[w < cap ? w : cap - 1] = 0;
  return w;
}

int nl_module_load(nl_device* dev, nl_image image, nl_module** out, char* err, size_t n_err) {
  if (!image.data || image.size == 0) {
    put(err, n_err, "cuda load module: empty image");
    return NL_CUDA_ERR;
  }
  nl_module* mod = calloc(1, sizeof *mod);
  char* logs = malloc(2 * (size_t)NL_CUDA_JIT_LOG_BYTES);
  if (!mod || !logs) {
    free(mod), free(logs);
    put(err, n_err, "cuda load module: out of host memory");
    return NL_CUDA_ERR;
  }
  char *error_log = logs, *info_log = logs + NL_CUDA_JIT_LOG_BYTES;
  error_log[0] = info_log[0] = 0;
  int opts[] = {5 /* CU_JIT_ERROR_LOG_BUFFER */, 6 /* CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES */,
                3 /* CU_JIT_INFO_LOG_BUFFER */, 4 /* CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES */,
                12 /* CU_JIT_LOG_VERBOSE */};
  // The driver reads each value as a pointer-sized word (buffers as pointers, sizes and flags
  // as integers) and writes the logs' lengths back into the size slots.
  void* vals[] = {error_log, (void*)(uintptr_t)NL_CUDA_JIT_LOG_BYTES, info_log,
                  (void*)(uintptr_t)NL_CUDA_JIT_LOG_BYTES, (void*)(uintptr_t)1};
  if (begin(dev, "load module", err, n_err)) {
    free(mod), free(logs);
    return NL_CUDA_ERR;
  }
  CUresult rc = drv.module_load_data_ex(&mod->h, image.data, 5, opts, vals);
  int st;
  if (rc != 0 && refused(rc)) {
    end_text(dev, NULL, err, n_err);  // a property of the image: the device stays healthy
    if (err && n_err > 0) {
      char why[160];
      size_t w = (size_t)snprintf(err, n_err, "cuda load module: %s; JIT error log: ",
                                  describe(rc, why, sizeof why));
      size_t elen = (uintptr_t)vals[1], ilen = (uintptr_t)vals[3];
      if (elen > NL_CUDA_JIT_LOG_BYTES) elen = NL_CUDA_JIT_LOG_BYTES;
      if (ilen > NL_CUDA_JIT_LOG_BYTES) ilen = NL_CUDA_JIT_LOG_BYTES;
      if (w < n_err) w += quote(err + w, n_err - w, error_log, elen);
      if (w < n_err) w += (size_t)snprintf(err + w, n_err - w, "; JIT info log: ");
      if (w < n_err) quote(err + w, n_err - w, info_log, ilen);
    }
    st = NL_CUDA_REFUSED;
  } else {
    st = end(dev, "load module", rc, err, n_err);
  }
  free(logs);
  if (st) {
    free(mod);
    return st;
  }
  mod->dev = dev;
  *out = mod;
  return NL_CUDA_OK;
}

int nl_cuda_image_choice(int* fatbin, int* ptx, char* err, size_t n_err) {
  const char* want = getenv("NEEDLE_CUDA_IMAGE");
  *fatbin = *ptx = 1;
  if (!want || !*want) return NL_CUDA_OK;
  if (!strcmp(want, "fatbin")) {
    *ptx = 0;
  } else if (!strcmp(want, "ptx")) {
    *fatbin = 0;
  } else {
    put(err, n_err, "cuda: NEEDLE_CUDA_IMAGE=\"%s\": want fatbin or ptx", want);
    return NL_CUDA_ERR;
  }
  return NL_CUDA_OK;
}

int nl_module_load_kernels(nl_device* dev, nl_image fatbin, nl_image ptx, nl_module** out,
                           int32_t* loaded_ptx, char* err, size_t n_err) {
  int want_fatbin, want_ptx;
  int st = nl_cuda_image_choice(&want_fatbin, &want_ptx, err, n_err);
  if (st) return st;
  const nl_image* tries[2];
  int n = 0;
  if (want_fatbin) tries[n++] = &fatbin;
  if (want_ptx) tries[n++] = &ptx;
  // Each image that does not load adds a line "<name>: <why>" to err.
  size_t used = 0;
  for (int i = 0; i < n; i++) {
    const nl_image* im = tries[i];
    char* e = err && used < n_err ? err + used : NULL;
    size_t n_e = e ? n_err - used : 0;
    if (e && used > 0 && n_e > 1) *e++ = '\n', n_e--;
    if (!im->data) {
      put(e, n_e, "%s: not built (run `make native` before building; fatbins need nvcc from "
                  "`make setup`)", im->name);
      st = NL_CUDA_ERR;
    } else {
      size_t w = e ? (size_t)snprintf(e, n_e, "%s: ", im->name) : 0;
      int room = e && w < n_e;
      st = nl_module_load(dev, *im, out, room ? e + w : NULL, room ? n_e - w : 0);
      if (st == NL_CUDA_OK) {
        if (loaded_ptx) *loaded_ptx = im == &ptx;
        return NL_CUDA_OK;
      }
    }
    if (e) used = (size_t)(e - err) + strlen(e);
    if (st != NL_CUDA_OK && st != NL_CUDA_REFUSED && im->data) return st;  // a device failure
  }
  return st;
}

int nl_module_unload(nl_module* mod, char* err, size_t n_err) {
  nl_device* dev = mod->dev;
  if (begin(dev, "unload module", err, n_err)) return NL_CUDA_ERR;
  int st = end(dev, "unload module", drv.module_unload(mod->h), err, n_err);
  free(mod);
  return st;
}

int nl_module_function(nl_module* mod, const char* name, nl_function* out, char* err,
                       size_t n_err) {
  char what[96];
  snprintf(what, sizeof what, "get function %s", name);
  if (begin(mod->dev, what, err, n_err)) return NL_CUDA_ERR;
  CUfunction fn = NULL;
  int st = end(mod->dev, what, drv.module_get_function(&fn, mod->h, name), err, n_err);
  if (st) return st;
  out->dev = mod->dev;
  out->fn = fn;
  snprintf(out->name, sizeof out->name, "%s", name);
  return NL_CUDA_OK;
}

int nl_function_launch(const nl_function* fn, const uint32_t grid[3], const uint32_t block[3],
                       uint64_t stream, const uint64_t* args, int32_t nargs, int32_t wait,
                       char* err, size_t n_err) {
  char what[96];
  snprintf(what, sizeof what, "launch %s", fn->name);
  if (nargs < 0 || nargs > NL_CUDA_MAX_ARGS) {
    put(err, n_err, "cuda %s: %d arguments (at most %d)", what, nargs, NL_CUDA_MAX_ARGS);
    return NL_CUDA_ERR;
  }
  // cuLaunchKernel reads params[i] -> the bytes of argument i during the call.
  void* params[NL_CUDA_MAX_ARGS + 1];
  for (int i = 0; i < nargs; i++) params[i] = (void*)&args[i];
  params[nargs] = NULL;
  if (begin(fn->dev, what, err, n_err)) return NL_CUDA_ERR;
  CUresult rc = drv.launch_kernel(fn->fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                  0, (CUstream)(uintptr_t)stream, params, NULL);
  if (rc == 0 && wait) rc = drv.ctx_synchronize();
  return end(fn->dev, what, rc, err, n_err);
}

// ---- cuBLAS -----------------------------------------------------------------------------------

typedef int cublasStatus_t;  // 0 is CUBLAS_STATUS_SUCCESS

static struct {
  cublasStatus_t (*create)(void**);
  cublasStatus_t (*destroy)(void*);
  cublasStatus_t (*gemm_ex)(void*, int, int, int, int, int, const void*, const void*, int, int,
                            const void*, int, int, const void*, void*, int, int, int, int);
} blas_lib;
static int blas_ready;  // set once blas_lib is bound; guarded by blas_mu
static pthread_mutex_t blas_mu = PTHREAD_MUTEX_INITIALIZER;

int nl_cublas_open(const char* path, char* err, size_t n_err) {
  pthread_mutex_lock(&blas_mu);
  int st = NL_CUDA_OK;
  if (!blas_ready) {
    void* h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      put(err, n_err, "%s", dlerror());
      st = NL_CUDA_NOLIB;
    } else {
      const symbol syms[] = {
          {(void**)&blas_lib.create, "cublasCreate_v2"},
          {(void**)&blas_lib.destroy, "cublasDestroy_v2"},
          {(void**)&blas_lib.gemm_ex, "cublasGemmEx"},
      };
      const char* missing = bind(h, syms, sizeof syms / sizeof syms[0]);
      if (missing) {
        put(err, n_err, "%s has no %s", path, missing);
        memset(&blas_lib, 0, sizeof blas_lib);
        dlclose(h);
        st = NL_CUDA_ERR;
      } else {
        blas_ready = 1;
      }
    }
  }
  pthread_mutex_unlock(&blas_mu);
  return st;
}

const char* nl_cublas_status_name(int32_t status) {
  switch (status) {  // cublas_api.h
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return NULL;
}

// blas_end finishes a cuBLAS call begun by begin: "cuda <call>: <status name> (N)" on failure.
static int blas_end(nl_device* dev, const char* call, cublasStatus_t st, char* err, size_t n_err) {
  if (st == 0) return end_text(dev, NULL, err, n_err);
  const char* name = nl_cublas_status_name(st);
  char msg[256];
  snprintf(msg, sizeof msg, "cuda %s: %s (%d)", call, name ? name : "unknown cuBLAS status", st);
  return end_text(dev, msg, err, n_err);
}

struct nl_blas {
  nl_device* dev;
  void* h;
};

int nl_blas_create(nl_device* dev, nl_blas** out, char* err, size_t n_err) {
  pthread_mutex_lock(&blas_mu);
  int ready = blas_ready;
  pthread_mutex_unlock(&blas_mu);
  if (!ready) {
    put(err, n_err, "cuda cublasCreate: cuBLAS is not open (nl_cublas_open)");
    return NL_CUDA_NOLIB;
  }
  nl_blas* b = calloc(1, sizeof *b);
  if (!b) {
    put(err, n_err, "cuda cublasCreate: out of host memory");
    return NL_CUDA_ERR;
  }
  b->dev = dev;
  if (begin(dev, "cublasCreate", err, n_err)) {
    free(b);
    return NL_CUDA_ERR;
  }
  int st = blas_end(dev, "cublasCreate", blas_lib.create(&b->h), err, n_err);
  if (st) {
    free(b);
    return st;
  }
  *out = b;
  return NL_CUDA_OK;
}

int nl_blas_destroy(nl_blas* b, char* err, size_t n_err) {
  nl_device* dev = b->dev;
  void* h = b->h;
  free(b);
  if (begin(dev, "cublasDestroy", err, n_err)) return NL_CUDA_ERR;
  return blas_end(dev, "cublasDestroy", blas_lib.destroy(h), err, n_err);
}

int nl_blas_gemm_ex(nl_blas* b, int32_t op_a, int32_t op_b, int32_t m, int32_t n, int32_t k,
                    float alpha, uint64_t a, int32_t lda, uint64_t bm, int32_t ldb, int32_t in_type,
                    float beta, uint64_t c, int32_t ldc, char* err, size_t n_err) {
  const int r32f = 0, compute_32f = 68 /* CUBLAS_COMPUTE_32F */, algo_default = -1;
  if (begin(b->dev, "cublasGemmEx", err, n_err)) return NL_CUDA_ERR;
  cublasStatus_t st = blas_lib.gemm_ex(b->h, op_a, op_b, m, n, k, &alpha, (const void*)(uintptr_t)a,
                                       in_type, lda, (const void*)(uintptr_t)bm, in_type, ldb,
                                       &beta, (void*)(uintptr_t)c, r32f, ldc, compute_32f,
                                       algo_default);
  return blas_end(b->dev, "cublasGemmEx", st, err, n_err);
}
