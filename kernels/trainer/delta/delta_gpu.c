// delta_gpu.c: delta_gpu.h's launcher. Compiled into package delta by cgo and into libneedle.so
// by capi/CMakeLists.txt; plain C11.
#include "kernels/trainer/delta/delta_gpu.h"

#include <stdio.h>
#include <stdlib.h>

int nl_delta_gpu_init(nl_delta_gpu* g, nl_module* mod, char* err, size_t n_err) {
  static const char* const kinds[3] = {"count", "write", "apply"};
  for (int w = 0; w < 2; w++) {
    nl_function* fns[3] = {&g->count[w], &g->write[w], &g->apply[w]};
    for (int k = 0; k < 3; k++) {
      char name[64];
      snprintf(name, sizeof name, "nl_cuda_delta_%s%d", kinds[k], w == 0 ? 16 : 32);
      int st = nl_module_function(mod, name, fns[k], err, n_err);
      if (st) return st;
    }
  }
  return NL_CUDA_OK;
}

static int64_t tiles(int64_t n) { return (n + NL_DELTA_TILE - 1) / NL_DELTA_TILE; }
static int64_t offsets_at(int64_t n) { return (4 * tiles(n) + 7) / 8 * 8; }

int64_t nl_delta_gpu_work_bytes(int64_t n) { return n < 0 ? -1 : offsets_at(n) + 8 * tiles(n); }

int nl_delta_gpu_check(const char* what, uint64_t old_bits, uint64_t new_bits, int64_t n,
                       int32_t elem_size, uint64_t work, int64_t work_bytes, int32_t idx_size,
                       uint64_t idx, uint64_t vals, char* err, size_t n_err) {
  int has_err = err && n_err > 0;
  if (n < 0 || (elem_size != 2 && elem_size != 4) || tiles(n) > NL_CUDA_GRID_MAX ||
      (n > 0 && (!old_bits || !new_bits || !work)) || work_bytes < nl_delta_gpu_work_bytes(n)) {
    if (has_err)
      snprintf(err, n_err,
               "%s: need n >= 0 elements of 2 or 4 bytes, both tensors and a work buffer of "
               "needle_cuda_delta_work_bytes(n) = %lld bytes (n=%lld elem_size=%d work_bytes=%lld)",
               what, (long long)nl_delta_gpu_work_bytes(n), (long long)n, elem_size,
               (long long)work_bytes);
    return NL_CUDA_ERR;
  }
  if (idx_size != 0 && ((idx_size != 4 && idx_size != 8) || (idx_size == 4 && n > 0xffffffffLL) ||
                        (n > 0 && (!idx || !vals)))) {
    if (has_err)
      snprintf(err, n_err,
               "%s: need idx and vals, and idx_size 4 (n <= 2^32-1) or 8 (idx_size=%d n=%lld)",
               what, idx_size, (long long)n);
    return NL_CUDA_ERR;
  }
  return NL_CUDA_OK;
}

int64_t nl_delta_gpu_count(const nl_delta_gpu* g, uint64_t old_bits, uint64_t new_bits,
                           int64_t n, int32_t elem_size, uint64_t work, int64_t work_bytes,
                           uint64_t stream, char* err, size_t n_err) {
  if (nl_delta_gpu_check("delta count on CUDA", old_bits, new_bits, n, elem_size, work,
                         work_bytes, 0, 0, 0, err, n_err))
    return -1;
  if (n == 0) return 0;
  const nl_function* count = &g->count[elem_size == 4];
  nl_device* dev = count->dev;
  int64_t t = tiles(n);
  uint64_t args[] = {old_bits, new_bits, (uint64_t)n, work};
  const uint32_t grid[3] = {(uint32_t)t, 1, 1}, block[3] = {NL_DELTA_BLOCK, 1, 1};
  if (nl_function_launch(count, grid, block, stream, args, 4, 0, err, n_err)) return -1;
  // Counts -> exclusive prefix sums on the host: t is n / NL_DELTA_TILE, small next to n.
  uint32_t* counts = malloc(4 * (size_t)t);
  uint64_t* offsets = malloc(8 * (size_t)t);
  int64_t total = -1;
  if (!counts || !offsets) {
    if (err && n_err > 0) snprintf(err, n_err, "delta count on CUDA: out of host memory");
  } else if (!nl_device_download_async(dev, counts, work, 4 * (uint64_t)t, stream, err, n_err) &&
             !nl_device_stream_synchronize(dev, stream, err, n_err)) {
    uint64_t sum = 0;
    for (int64_t i = 0; i < t; i++) offsets[i] = sum, sum += counts[i];
    // From pageable memory the upload has read offsets when it returns; write's launch is
    // queued after it on the same stream.
    if (!nl_device_upload_async(dev, work + (uint64_t)offsets_at(n), offsets, 8 * (uint64_t)t,
                                stream, err, n_err))
      total = (int64_t)sum;
  }
  free(counts);
  free(offsets);
  return total;
}

int nl_delta_gpu_write(const nl_delta_gpu* g, uint64_t old_bits, uint64_t new_bits, int64_t n,
                       int32_t elem_size, uint64_t work, int64_t work_bytes, uint64_t idx,
                       int32_t idx_size, uint64_t vals, uint64_t stream, char* err,
                       size_t n_err) {
  int st = nl_delta_gpu_check("delta write on CUDA", old_bits, new_bits, n, elem_size, work,
                              work_bytes, idx_size, idx, vals, err, n_err);
  if (st || n == 0) return st;
  uint64_t args[] = {old_bits, new_bits, (uint64_t)n, work + (uint64_t)offsets_at(n),
                     idx,      nl_cuda_arg_i32(idx_size), vals};
  const uint32_t grid[3] = {(uint32_t)tiles(n), 1, 1}, block[3] = {NL_DELTA_BLOCK, 1, 1};
  return nl_function_launch(&g->write[elem_size == 4], grid, block, stream, args, 7, 0, err,
                            n_err);
}

int nl_delta_gpu_apply(const nl_delta_gpu* g, uint64_t base, int32_t elem_size, uint64_t idx,
                       int32_t idx_size, uint64_t vals, int64_t nnz, uint64_t stream, char* err,
                       size_t n_err) {
  if ((elem_size != 2 && elem_size != 4) || (idx_size != 4 && idx_size != 8) || nnz < 0 ||
      (nnz > 0 && (!base || !idx || !vals))) {
    if (err && n_err > 0)
      snprintf(err, n_err,
               "delta apply on CUDA: need elements of 2 or 4 bytes, indices of 4 or 8, nnz >= 0 "
               "and all three buffers (elem_size=%d idx_size=%d nnz=%lld)",
               elem_size, idx_size, (long long)nnz);
    return NL_CUDA_ERR;
  }
  if (nnz == 0) return NL_CUDA_OK;
  int64_t blocks = (nnz + NL_DELTA_BLOCK - 1) / NL_DELTA_BLOCK;
  if (blocks > NL_DELTA_APPLY_BLOCKS) blocks = NL_DELTA_APPLY_BLOCKS;
  uint64_t args[] = {base, idx, nl_cuda_arg_i32(idx_size), vals, (uint64_t)nnz};
  const uint32_t grid[3] = {(uint32_t)blocks, 1, 1}, block[3] = {NL_DELTA_BLOCK, 1, 1};
  return nl_function_launch(&g->apply[elem_size == 4], grid, block, stream, args, 5, 0, err,
                            n_err);
}
