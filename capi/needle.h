/* needle.h: needle's tensor ops for the trainer's own process (libneedle.so; no Go runtime).
 *
 * Every function works on caller-owned buffers, holds no state between calls, is safe to call
 * from many threads at once, never aborts, and returns 0 on success or -1 after copying a
 * NUL-terminated message into err[0 : err_len) (nothing is copied when err is NULL or err_len
 * <= 0). Only sized integers and floats cross. Arrays are row-major and contiguous.
 * The SIMD level is the best the CPU has, or NEEDLE_SIMD=ref|avx2|avx512 (read once).
 */
#ifndef NEEDLE_H
#define NEEDLE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NEEDLE_ABI_VERSION 2 /* 2: the needle_cuda_* entry points */

/* needle_abi_version returns NEEDLE_ABI_VERSION of the library (check it against the header). */
int32_t needle_abi_version(void);

/* needle_simd_level copies the SIMD level in use ("ref", "avx2", "avx512") into buf; returns 0,
 * or -1 (message in buf) when NEEDLE_SIMD names no level or one the CPU lacks (the message then
 * lists the missing CPU features). */
int32_t needle_simd_level(char* buf, int64_t buf_len);

/* ---- log-probabilities (verl logprobs_from_logits / entropy_from_logits semantics) ----------
 * logits [n, v] (fp32, IEEE fp16 bits or bf16 bits), labels [n] -> out_logprob [n] and, when
 * not NULL, out_entropy [n] and out_lse [n], all fp32, on y = logits / temperature:
 *   lse = log sum exp y;  logprob = y[label] - lse, or 0 when label == ignore_index (-100 in
 *   PyTorch); entropy = lse - sum softmax(y) * y (computed for ignored rows too, as verl).
 * A row with a NaN gives NaN outputs for that row only (logprob stays 0 if ignored).
 * Rows are split over `threads` threads (< 1 means 1). Errors: label outside [0, v) and not
 * ignore_index, temperature <= 0 or not finite, bad shape, NULL buffers; then nothing is written.
 */
int32_t needle_logprob_f32(const float* logits, int64_t n, int64_t v, const int64_t* labels,
                           float temperature, int64_t ignore_index, int32_t threads,
                           float* out_logprob, float* out_entropy, float* out_lse, char* err,
                           int64_t err_len);
int32_t needle_logprob_f16(const uint16_t* logits, int64_t n, int64_t v, const int64_t* labels,
                           float temperature, int64_t ignore_index, int32_t threads,
                           float* out_logprob, float* out_entropy, float* out_lse, char* err,
                           int64_t err_len);
int32_t needle_logprob_bf16(const uint16_t* logits, int64_t n, int64_t v, const int64_t* labels,
                            float temperature, int64_t ignore_index, int32_t threads,
                            float* out_logprob, float* out_entropy, float* out_lse, char* err,
                            int64_t err_len);

/* needle_linear_logprob_f32: the same outputs from hidden [n, h] and lm_head [v, h] (logits =
 * hidden . lm_head^T) without holding [n, v]: chunks of rows x 1024 vocabulary rows of
 * batch-invariant dot products (a row's results never depend on the other rows), the row chunks
 * on OpenMP's threads (OMP_NUM_THREADS). */
int32_t needle_linear_logprob_f32(const float* hidden, int64_t n, int64_t h, const float* lm_head,
                                  int64_t v, const int64_t* labels, float temperature,
                                  int64_t ignore_index, float* out_logprob, float* out_entropy,
                                  float* out_lse, char* err, int64_t err_len);

/* ---- delta weight transfer: declarations owned by the delta engineer go below ---------------- */

/* Delta of two versions of a tensor of n elements of elem_size bytes (2: bf16/fp16, 4: fp32),
 * compared as raw bits (a NaN payload or -0.0 vs 0.0 is a change). Indices are little-endian
 * u32 (idx_size 4) or u64 (idx_size 8; AstraFlow uses 8 when n > 2^32 - 1), strictly increasing.
 *
 * needle_delta_encode writes the index of every element whose bits differ to idx and its new
 * bits to vals, in increasing order, and returns how many (>= 0), or -1. idx must have room for
 * n indices and vals for n elements (the all-changed case); entries past the returned count
 * are scratch (a few may be written). One thread.
 *
 * needle_delta_apply checks that the nnz indices are strictly increasing and below n, then writes
 * vals[k] at element idx[k] of base; on error (-1) base is untouched. One thread. */
int64_t needle_delta_encode(const void* old_bits, const void* new_bits, int64_t n,
                            int32_t elem_size, void* idx, int32_t idx_size, void* vals, char* err,
                            int64_t err_len);
int32_t needle_delta_apply(void* base, int64_t n, int32_t elem_size, const void* idx,
                           int32_t idx_size, const void* vals, int64_t nnz, char* err,
                           int64_t err_len);

/* ---- memory read bandwidth (the yardstick of the bandwidth-bound kernels) ------------------
 * needle_membw_read reads the bytes / 8 whole 64-bit words of buf once, with full-width vector
 * loads at the library's SIMD level (platform/membw), and writes their wrapping sum to
 * out_sum (it keeps the reads from being dropped). One thread; time it to get read bandwidth. */
int32_t needle_membw_read(const void* buf, int64_t bytes, uint64_t* out_sum, char* err,
                          int64_t err_len);

/* ---- CUDA: the same ops on device memory (a trainer's torch CUDA tensors) --------------------
 * Never run on a GPU yet (docs/gpu.md, "What has never run on a GPU"). The CUDA driver (libcuda.so.1,
 * or NEEDLE_CUDA_LIB) is opened at the first call: without it these return -1 saying so, and the
 * library works as before. Device addresses cross as uint64_t. Work runs on GPU `device` (an
 * ordinal among CUDA_VISIBLE_DEVICES) in its primary context, the CUDA runtime's and PyTorch's,
 * queued on `stream` (a CUstream handle, e.g. torch.cuda.current_stream().cuda_stream; 0 is the
 * legacy default stream); a call returns once the work is queued, unless said otherwise. Buffers
 * must stay alive until the stream has run it. The kernels are logprob.cu and delta.cu, linked
 * in as nvcc's fatbin (sm_80/sm_90 machine code + PTX) when the build had nvcc, else clang's PTX
 * (NEEDLE_CUDA_IMAGE=ptx|fatbin picks one). They run on needle's CUDA host core (cuda/host.h), as
 * the needle binary does: calls on one device are serialized (a delta count's wait holds the
 * others back), and after a failing CUDA call every later call on that device fails with its
 * error (a CUDA error usually leaves the context unusable).
 *
 * needle_cuda_logprob_*: needle_logprob_*'s outputs from logits [n, v] and labels [n] in device
 * memory into device buffers (out_entropy and out_lse may be 0), one block of threads per row,
 * n <= 2^31 - 1. A label outside [0, v) that is not ignore_index gives NaN for its row
 * (device-resident labels are not checked on the host; that would wait for the stream). */
int32_t needle_cuda_logprob_f32(uint64_t logits, int64_t n, int64_t v, uint64_t labels,
                                float temperature, int64_t ignore_index, uint64_t out_logprob,
                                uint64_t out_entropy, uint64_t out_lse, int32_t device,
                                uint64_t stream, char* err, int64_t err_len);
int32_t needle_cuda_logprob_f16(uint64_t logits, int64_t n, int64_t v, uint64_t labels,
                                float temperature, int64_t ignore_index, uint64_t out_logprob,
                                uint64_t out_entropy, uint64_t out_lse, int32_t device,
                                uint64_t stream, char* err, int64_t err_len);
int32_t needle_cuda_logprob_bf16(uint64_t logits, int64_t n, int64_t v, uint64_t labels,
                                 float temperature, int64_t ignore_index, uint64_t out_logprob,
                                 uint64_t out_entropy, uint64_t out_lse, int32_t device,
                                 uint64_t stream, char* err, int64_t err_len);

/* Delta encode of two device tensors of n elements of elem_size bytes, in two calls around the
 * caller's allocation of the outputs (their size is known only after the first):
 * needle_cuda_delta_work_bytes(n) is the size of the work buffer (device memory) both calls take;
 * needle_cuda_delta_count counts the changed elements into it and returns how many (>= 0), or -1;
 * it waits for the stream (the count comes back to the host);
 * needle_cuda_delta_write then writes their indices (idx_size 4: u32, n <= 2^32 - 1; or 8) to idx
 * and their new bits to vals (device buffers of count entries), in increasing order, exactly as
 * needle_delta_encode does. Call write with the same tensors and work buffer, before anything
 * changes them. Applying a delta on the device is not built (its indices would have to be checked
 * there first); apply on the host with needle_delta_apply. */
int64_t needle_cuda_delta_work_bytes(int64_t n);
int64_t needle_cuda_delta_count(uint64_t old_bits, uint64_t new_bits, int64_t n, int32_t elem_size,
                                uint64_t work, int64_t work_bytes, int32_t device, uint64_t stream,
                                char* err, int64_t err_len);
int32_t needle_cuda_delta_write(uint64_t old_bits, uint64_t new_bits, int64_t n, int32_t elem_size,
                                uint64_t work, int64_t work_bytes, uint64_t idx, int32_t idx_size,
                                uint64_t vals, int32_t device, uint64_t stream, char* err,
                                int64_t err_len);

#ifdef __cplusplus
}
#endif

#endif /* NEEDLE_H */
