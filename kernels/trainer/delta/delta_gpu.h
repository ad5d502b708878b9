// delta_gpu.h: the C launcher of delta.cu on the CUDA host core (cuda/host.h), the one used by Go
// (delta.GPU, through cgo) and by libneedle.so (needle_cuda_delta_*): the kernels of each
// element width, the grids, the parameter layouts, and encode's sequence (count the changes per
// tile -> exclusive prefix sums on the host -> write). Errors: host.h's rules.
//
// Encode's work buffer (device memory, nl_delta_gpu_work_bytes(n)) holds the tiles' change
// counts (u32), then from an 8-byte aligned offset their exclusive prefix sums (u64), which
// nl_delta_gpu_count leaves there for nl_delta_gpu_write.
#ifndef NEEDLE_DELTA_GPU_H
#define NEEDLE_DELTA_GPU_H

#include "cuda/host.h"
#include "kernels/trainer/delta/delta_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

// nl_delta_gpu is delta.cu's kernels on one device, [0] for 2-byte elements (bf16/fp16 bits),
// [1] for 4-byte ones (fp32 bits). Caller-owned; valid while the module stays loaded.
typedef struct {
  nl_function count[2], write[2], apply[2];
} nl_delta_gpu;

// nl_delta_gpu_init finds the kernels in mod, a module of delta.cu's images.
int nl_delta_gpu_init(nl_delta_gpu* g, nl_module* mod, char* err, size_t n_err);

// nl_delta_gpu_work_bytes is the size of encode's work buffer for n elements; -1 for n < 0.
int64_t nl_delta_gpu_work_bytes(int64_t n);

// nl_delta_gpu_check refuses arguments count and write cannot take, before any device call:
// n < 0, an element size other than 2 or 4, more tiles than a grid holds, a null tensor or work
// buffer when n > 0, a work buffer smaller than nl_delta_gpu_work_bytes(n); with idx_size != 0
// (write's check) also an idx_size other than 4 (n <= 2^32 - 1) or 8, or null idx or vals when
// n > 0. The error starts "what: ".
int nl_delta_gpu_check(const char* what, uint64_t old_bits, uint64_t new_bits, int64_t n,
                       int32_t elem_size, uint64_t work, int64_t work_bytes, int32_t idx_size,
                       uint64_t idx, uint64_t vals, char* err, size_t n_err);

// nl_delta_gpu_count counts the elements whose bits differ between old_bits and new_bits (n
// elements of elem_size bytes on the device) into work and returns how many (>= 0), or -1. It
// waits for stream (the count comes back to the host), then queues the prefix sums' upload.
int64_t nl_delta_gpu_count(const nl_delta_gpu* g, uint64_t old_bits, uint64_t new_bits,
                           int64_t n, int32_t elem_size, uint64_t work, int64_t work_bytes,
                           uint64_t stream, char* err, size_t n_err);

// nl_delta_gpu_write queues the write of every changed element's index (idx_size 4: u32, or 8)
// to idx and new bits to vals (device buffers of count's entries), in increasing order: the
// layout of needle_delta_encode. Same tensors and work buffer as the count before it.
int nl_delta_gpu_write(const nl_delta_gpu* g, uint64_t old_bits, uint64_t new_bits, int64_t n,
                       int32_t elem_size, uint64_t work, int64_t work_bytes, uint64_t idx,
                       int32_t idx_size, uint64_t vals, uint64_t stream, char* err,
                       size_t n_err);

// nl_delta_gpu_apply queues base[idx[k]] = vals[k] for the nnz entries (elements of elem_size
// bytes; idx_size 4 or 8), whose indices the caller has checked against base's size.
int nl_delta_gpu_apply(const nl_delta_gpu* g, uint64_t base, int32_t elem_size, uint64_t idx,
                       int32_t idx_size, uint64_t vals, int64_t nnz, uint64_t stream, char* err,
                       size_t n_err);

#ifdef __cplusplus
}
#endif

#endif
