// The scalar reference row kernel: the oracle every SIMD and CUDA variant is tested against.
// Blocks of NL_REF_BLOCK elements are summed separately and merged, so the fp32 rounding error
// grows with the block size, not the vocab (one serial sum over 152k entries drifts ~2e-5).
#include "logprob.h"

#define NL_REF_BLOCK 512

void nl_stats_ref(const void* row, int32_t dtype, int64_t len, float inv_t, nl_stats* st) {
  for (int64_t b = 0; b < len; b += NL_REF_BLOCK) {
    int64_t end = len - b < NL_REF_BLOCK ? len : b + NL_REF_BLOCK;
    nl_stats blk = NL_STATS_EMPTY;
    for (int64_t i = b; i < end; i++) nl_stats_push(&blk, nl_load(row, dtype, i) * inv_t);
    nl_stats_merge(st, blk.m, blk.s, blk.t);
  }
}
