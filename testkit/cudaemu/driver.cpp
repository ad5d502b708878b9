// libcudaemu_driver.so: the CUDA driver API functions and the cuBLAS calls needle makes, emulated
// on the CPU, so the host code that drives a GPU (the CUDA host core cuda/host.c and the kernels'
// C launchers, as package cuda and libneedle's needle_cuda_* run them) runs end to end on a
// machine without one: NEEDLE_CUDA_LIB (and NEEDLE_CUBLAS) point either at this library. Launches run the real kernels of logprob.cu,
// delta.cu, flatscangpu.cu and nngpu.cu under cudaemu.h; cublasGemmEx is written from cuBLAS's
// definition (column-major, op(A) m x k, leading dimensions), independently of needle's callers,
// so their operand layouts and transposes are checked against it. "Device memory" is host
// memory, so device pointers are host addresses and copies are memcpy. Everything runs at once,
// in order (streams are labels). It checks what a driver would refuse: unknown kernels, images
// that are neither a fatbin nor PTX, launches with no threads or more than 1,024, frees of
// memory it did not hand out, GEMM types other than the fp16/fp32 ones needle uses.
//
// This is a test double, not a GPU: what it proves is the host side (argument layouts, sizes,
// offsets, context and stream handling, error paths); the device's own behaviour (JIT,
// scheduling, approximate ex2/lg2, speed) is for the GPU check. Test hook: CUDAEMU_REFUSE=fatbin
// (or =ptx) makes module loads of that kind fail as a driver that refuses the image would, with
// a JIT error log, so the fallback and the log reporting run too.
#include "kernels/search/flatscangpu/flatscangpu.cu"
#include "kernels/bert/nngpu/nngpu.cu"
#include "kernels/trainer/delta/delta.cu"
#include "kernels/trainer/logprob/logprob.cu"

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

namespace {

typedef int CUresult;
enum : CUresult {
  OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, INVALID_IMAGE = 200, NO_BINARY_FOR_GPU = 209,
  INVALID_PTX = 218, NOT_FOUND = 500, INVALID_HANDLE = 400,
};

// launch_as unpacks the driver's parameter array (params[i] points at argument i) into the
// kernel's own argument types and runs it under cudaemu.
template <typename... A, size_t... I>
void unpack(void (*k)(A...), dim3 grid, dim3 block, void** params, std::index_sequence<I...>) {
  cuemu::launch(grid, block, k, *static_cast<A*>(params[I])...);
}
template <typename... A>
void (*thunk(void (*)(A...)))(void*, dim3, dim3, void**) {
  return [](void* k, dim3 grid, dim3 block, void** params) {
    unpack(reinterpret_cast<void (*)(A...)>(k), grid, block, params, std::index_sequence_for<A...>{});
  };
}

struct Kernel {
  void* fn;
  void (*run)(void*, dim3, dim3, void**);
};

#define KERNEL(name) {#name, Kernel{reinterpret_cast<void*>(&name), thunk(&name)}}
const std::map<std::string, Kernel> kernels = {
    KERNEL(nl_cuda_logprob_f32),   KERNEL(nl_cuda_logprob_f16),   KERNEL(nl_cuda_logprob_bf16),
    KERNEL(nl_cuda_delta_count16), KERNEL(nl_cuda_delta_write16), KERNEL(nl_cuda_delta_apply16),
    KERNEL(nl_cuda_delta_count32), KERNEL(nl_cuda_delta_write32), KERNEL(nl_cuda_delta_apply32),
    KERNEL(nl_topk_tile),          KERNEL(nl_topk_merge),         KERNEL(nl_topk_sort),
    KERNEL(nl_rows_prepare),       KERNEL(nl_rows_random),        KERNEL(nl_read),
    KERNEL(ng_embed_layernorm),    KERNEL(ng_add_layernorm),      KERNEL(ng_bias_gelu),
    KERNEL(ng_attention_hd32),     KERNEL(ng_attention_hd64),     KERNEL(ng_pool),
    KERNEL(ng_to_half_rows),
};

std::mutex mu;
std::set<void*> allocations;  // device and pinned host memory handed out
int module_serial = 0;
int primary_ctx = 1;  // the one context: its address is the handle

CUresult alloc(void** p, uint64_t size) {
  *p = std::calloc(1, size ? size : 1);
  if (!*p) return OUT_OF_MEMORY;
  std::lock_guard<std::mutex> l(mu);
  allocations.insert(*p);
  return OK;
}

CUresult release(void* p) {
  std::lock_guard<std::mutex> l(mu);
  if (!allocations.erase(p)) return INVALID_VALUE;
  std::free(p);
  return OK;
}

void copy_log(const char* text, unsigned n, int* opts, void** vals) {
  for (unsigned i = 0; i + 1 < n; i++) {
    if (opts[i] == 5 /* CU_JIT_ERROR_LOG_BUFFER */ && opts[i + 1] == 6 /* its size */) {
      size_t cap = (size_t)(uintptr_t)vals[i + 1];
      if (cap > 0) std::snprintf(static_cast<char*>(vals[i]), cap, "%s", text);
      vals[i + 1] = (void*)(uintptr_t)(std::strlen(text) + 1 < cap ? std::strlen(text) + 1 : cap);
    }
  }
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned) { return OK; }
CUresult cuDriverGetVersion(int* version) {
  *version = 12040;  // the emulation claims CUDA 12.4
  return OK;
}
CUresult cuDeviceGetCount(int* n) { *n = 1; return OK; }
CUresult cuDeviceGet(int* dev, int ordinal) { *dev = ordinal; return ordinal == 0 ? OK : INVALID_VALUE; }
CUresult cuDeviceGetName(char* name, int n, int) {
  std::snprintf(name, n, "cudaemu (CPU emulation, not a GPU)");
  return OK;
}
CUresult cuDevicePrimaryCtxRetain(void** ctx, int) { *ctx = &primary_ctx; return OK; }
CUresult cuDevicePrimaryCtxRelease_v2(int) { return OK; }
CUresult cuCtxPushCurrent_v2(void* ctx) { return ctx == &primary_ctx ? OK : INVALID_HANDLE; }
CUresult cuCtxPopCurrent_v2(void** ctx) { *ctx = &primary_ctx; return OK; }
CUresult cuCtxSynchronize() { return OK; }
CUresult cuStreamSynchronize(void*) { return OK; }

CUresult cuModuleLoadDataEx(void** mod, const void* image, unsigned n, int* opts, void** vals) {
  uint32_t magic;
  std::memcpy(&magic, image, 4);
  bool fatbin = magic == 0xBA55ED50u;
  bool ptx = !fatbin && std::strstr(static_cast<const char*>(image), ".version") != nullptr;
  const char* refuse = std::getenv("CUDAEMU_REFUSE");
  if (!fatbin && !ptx) {
    copy_log("cudaemu: the image is neither a fatbin nor PTX text", n, opts, vals);
    return INVALID_IMAGE;
  }
  if (refuse && !std::strcmp(refuse, fatbin ? "fatbin" : "ptx")) {
    copy_log(fatbin ? "cudaemu: no image for this GPU in the fatbin (CUDAEMU_REFUSE=fatbin)"
                    : "ptxas application ptx input, line 1; fatal: cudaemu refuses (CUDAEMU_REFUSE=ptx)\n"
                      "ptxas fatal   : Ptx assembly aborted due to \"errors\"",
             n, opts, vals);
    return fatbin ? NO_BINARY_FOR_GPU : INVALID_PTX;
  }
  std::lock_guard<std::mutex> l(mu);
  *mod = reinterpret_cast<void*>((uintptr_t)++module_serial);
  return OK;
}
CUresult cuModuleUnload(void*) { return OK; }
CUresult cuModuleGetFunction(void** fn, void*, const char* name) {
  auto k = kernels.find(name);
  if (k == kernels.end()) return NOT_FOUND;
  *fn = const_cast<Kernel*>(&k->second);
  return OK;
}
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, void*, void** params, void** extra) {
  unsigned threads = bx * by * bz;
  if (!f || threads == 0 || threads > 1024 || gx * gy * gz == 0 || shared != 0 || extra) return INVALID_VALUE;
  const Kernel* k = static_cast<const Kernel*>(f);
  k->run(k->fn, dim3(gx, gy, gz), dim3(bx, by, bz), params);
  return OK;
}

CUresult cuMemAlloc_v2(uint64_t* p, uint64_t size) {
  void* h;
  CUresult rc = alloc(&h, size);
  *p = (uint64_t)(uintptr_t)h;
  return rc;
}
CUresult cuMemFree_v2(uint64_t p) { return release(reinterpret_cast<void*>((uintptr_t)p)); }
CUresult cuMemHostAlloc(void** p, uint64_t size, unsigned) { return alloc(p, size); }
CUresult cuMemFreeHost(void* p) { return release(p); }
CUresult cuMemGetInfo_v2(uint64_t* free, uint64_t* total) {
  *free = 1ull << 30, *total = 2ull << 30;
  return OK;
}
CUresult cuMemcpyHtoD_v2(uint64_t dst, const void* src, uint64_t n) {
  std::memcpy(reinterpret_cast<void*>((uintptr_t)dst), src, n);
  return OK;
}
CUresult cuMemcpyDtoH_v2(void* dst, uint64_t src, uint64_t n) {
  std::memcpy(dst, reinterpret_cast<const void*>((uintptr_t)src), n);
  return OK;
}
CUresult cuMemcpyHtoDAsync_v2(uint64_t dst, const void* src, uint64_t n, void*) {
  return cuMemcpyHtoD_v2(dst, src, n);
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, uint64_t src, uint64_t n, void*) {
  return cuMemcpyDtoH_v2(dst, src, n);
}
CUresult cuGetErrorString(CUresult rc, const char** s) {
  static const std::map<CUresult, const char*> names = {
      {OK, "no error"}, {INVALID_VALUE, "invalid argument"}, {OUT_OF_MEMORY, "out of memory"},
      {INVALID_IMAGE, "device kernel image is invalid"}, {NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device"},
      {INVALID_PTX, "a PTX JIT compilation failed"}, {NOT_FOUND, "named symbol not found"},
      {INVALID_HANDLE, "invalid resource handle"}};
  auto it = names.find(rc);
  *s = it == names.end() ? nullptr : it->second;
  return it == names.end() ? INVALID_VALUE : OK;
}

// cuBLAS (cublasStatus_t: 0 success, 7 invalid value, 15 not supported).
int cublasCreate_v2(void** h) { static int handle; *h = &handle; return 0; }
int cublasDestroy_v2(void*) { return 0; }
int cublasGemmEx(void*, int transa, int transb, int m, int n, int k, const void* alpha, const void* a,
                 int atype, int lda, const void* b, int btype, int ldb, const void* beta, void* c, int ctype,
                 int ldc, int compute, int) {
  const int r32f = 0, r16f = 2, compute32f = 68;
  if (atype != btype || (atype != r32f && atype != r16f) || ctype != r32f || compute != compute32f) return 15;
  if (m < 0 || n < 0 || k < 0 || (transa > 1 || transb > 1) || lda < (transa ? k : m) || ldb < (transb ? n : k) || ldc < m)
    return 7;
  auto elem = [&](const void* p, long long i) {
    return atype == r32f ? static_cast<const float*>(p)[i]
                         : (float)std::bit_cast<_Float16>(static_cast<const uint16_t*>(p)[i]);
  };
  float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  float* cm = static_cast<float*>(c);
  for (long long j = 0; j < n; j++) {
    for (long long i = 0; i < m; i++) {
      double acc = 0;  // op(A)[i, l] * op(B)[l, j], column-major
      for (long long l = 0; l < k; l++)
        acc += (double)elem(a, transa ? l + i * lda : i + l * lda) * elem(b, transb ? j + l * ldb : l + j * ldb);
      float* out = &cm[i + j * ldc];
      *out = al * (float)acc + (be == 0 ? 0.0f : be * *out);  // beta 0: C is not read (may be NaN)
    }
  }
  return 0;
}

}  // extern "C"
