/* Delta-weight kernels: find the elements whose bit patterns differ between two tensors
 * (encode) and write new bits at listed positions (apply). Elements are 2 bytes (bf16, fp16)
 * or 4 bytes (fp32) compared as raw bits, so NaN payloads and -0.0 count as changes.
 * Indices are little-endian u32 or u64 (idx_size 4 or 8), strictly increasing.
 * All buffers are caller-owned; no function allocates, aborts or keeps a pointer.
 * Errors: a function that can fail returns a negative value and copies a NUL-terminated
 * message into err[0..errlen) in the same call. Thread-safe: no shared state. */
#ifndef NL_DELTA_H
#define NL_DELTA_H

#include <stdint.h>

#include "../../../platform/cpu/cpu.h" /* the SIMD levels, NL_LEVEL_* */

#ifdef __cplusplus
extern "C" {
#endif

/* nl_delta_encode compares n elements of old_bits and new_bits. For each element i
 * whose bits differ it writes index first+i to idx (idx_size bytes each) and the element's
 * new bits to vals, in increasing i. idx needs room for n indices and vals for n elements;
 * entries past the returned count are scratch (a SIMD level may write a few there).
 * Returns the number of changed elements, or -1 (bad elem_size/idx_size/level, or an
 * index that does not fit idx_size). */
int64_t nl_delta_encode(int32_t level, const void *old_bits, const void *new_bits,
                            int64_t n, int32_t elem_size, uint64_t first, void *idx,
                            int32_t idx_size, void *vals, char *err, int64_t errlen);

/* nl_delta_check verifies that nnz indices are strictly increasing and below n.
 * Returns 0, or -1 with err naming the first bad entry. */
int32_t nl_delta_check(int32_t level, const void *idx, int32_t idx_size, int64_t nnz,
                           uint64_t n, char *err, int64_t errlen);

/* nl_delta_scatter writes vals[k] at element idx[k] of base for k < nnz: the first
 * write_bytes bytes of each (elem_size: whole values; half of it: the low bytes of
 * little-endian values, as version-2 packed records give them). It trusts the indices: call
 * nl_delta_check first. */
void nl_delta_scatter(void *base, int32_t elem_size, int32_t write_bytes, const void *idx,
                      int32_t idx_size, const void *vals, int64_t nnz);

/* nl_delta_apply = check, then scatter: on error base is untouched. Returns 0 or -1. */
int32_t nl_delta_apply(int32_t level, void *base, int64_t n, int32_t elem_size,
                           const void *idx, int32_t idx_size, const void *vals, int64_t nnz,
                           char *err, int64_t errlen);

/* nl_delta_packed_payload writes to out the payload of a packed record (weights/wire/codec.go)
 * of nnz entries as nl_delta_encode wrote them (idx, vals) for a tensor whose old bits are
 * old_bits: the gap words, then byte planes 0 to planes-1 of the values (byte b of every
 * value), then, when exceptions is set, a uvarint count and, per entry whose bytes from planes
 * on differ from old_bits' at its index, the uvarint of its entry number less the previous
 * one's less 1 and those bytes. Gaps: entry k's is idx[k] - idx[k-1] - 1 (entry 0's is idx[0]),
 * written as floor(gap / M) words of M = 2^(8 width) - 1, then the rest, in words of width 1,
 * 2 or 4 bytes; width 0 takes the width of the shortest gap stream (the narrowest of equal
 * ones). *width_used is the width written, *gap_bytes the gap stream's length. It trusts its
 * arguments: indices strictly increasing and below the old tensor's length n, out with room,
 * for each width it may write, for width * (nnz + n / M) + nnz * planes bytes and, with
 * exceptions, 10 + nnz * (10 + elem_size - planes) more. Returns the bytes written. */
int64_t nl_delta_packed_payload(const void *old_bits, int32_t elem_size, const void *idx,
                                 int32_t idx_size, const void *vals, int64_t nnz, int32_t width,
                                 int32_t planes, int32_t exceptions, void *out, int32_t *width_used,
                                 int64_t *gap_bytes);

#ifdef __cplusplus
}
#endif
#endif
