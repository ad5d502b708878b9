// logprob.h: needle's log-probability kernels, the C side shared by the Go package (cgo) and
// libneedle.so (capi/). Pure C11, no Go, no globals; every entry point is thread-safe and copies
// its error message into the caller's buffer before returning (never aborts).
//
// Semantics follow verl (logprobs_from_logits, entropy_from_logits) on y = logits / temperature,
// all math in fp32, one pass over each row (online max / sum):
//   lse[i]     = log sum_j exp(y[i,j])
//   logprob[i] = y[i,labels[i]] - lse[i], or 0 when labels[i] == ignore_index
//   entropy[i] = lse[i] - sum_j softmax(y[i])_j * y[i,j]  (computed for ignored rows too, as verl
//                does: its entropy never sees labels; the trainer masks it afterwards)
// A row holding a NaN gives NaN in all three outputs of that row only (logprob stays 0 when its
// label is ignored, as in flash-attn's cross entropy, whose ignored rows are 0 unconditionally).
// -inf entries contribute 0 (a label on a -inf entry gives logprob -inf); a +inf entry (also one
// that logits / temperature overflows to) makes the row NaN, as log_softmax does. A row of only
// -inf is undefined (NaN or -inf).
#ifndef NEEDLE_LOGPROB_H
#define NEEDLE_LOGPROB_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "../../../platform/cpu/cpu.h"  // NL_LEVEL_*
#include "dtype.h"

// nl_logprob_args describes one call. Buffers are the caller's; out_entropy and out_lse may be
// NULL. logits is row-major [n, v] of dtype; labels is [n]; outputs are [n] fp32.
typedef struct {
  const void* logits;
  int32_t dtype;
  int64_t n, v;
  const int64_t* labels;
  float temperature;
  int64_t ignore_index;
  float* out_logprob;
  float* out_entropy;
  float* out_lse;
} nl_logprob_args;

// nl_logprob_run computes a->out_* with the kernels of SIMD level `level`, rows split over
// `threads` pthreads (the caller's thread is one of them; < 1 means 1). Returns 0, or -1 with a
// message in err[0:errlen) (bad label, temperature <= 0, bad shape, unknown dtype/level), in
// which case no output is written. A thread that cannot start has its rows run by the caller's.
int nl_logprob_run(const nl_logprob_args* a, int32_t level, int32_t threads, char* err,
                   size_t errlen);

// nl_linear_logprob_run is the fused op: logits = hidden[n,h] . lm_head[v,h]^T are produced in
// chunks of nl_linear_chunk_rows(h) rows x NL_LINEAR_CHUNK_VOCAB vocabulary rows by dotmm into a
// scratch buffer per thread and combined online, so [n,v] is never held; the row chunks run on
// OpenMP's threads. A row's results do not depend on the other rows (dotmm is batch-invariant).
// Outputs and errors as nl_logprob_run (a->logits and a->dtype are unused), and -1 when a
// thread's scratch cannot be allocated (the outputs are then partly written).
#define NL_LINEAR_CHUNK_VOCAB 1024
// nl_linear_chunk_rows: a chunk's hidden rows take about 512 KB (8 to 256 rows: each chunk
// streams all of lm_head, and its rows stay in L2 or L3 while lm_head's stream by), and every
// one of `threads` threads gets a chunk when n allows. (Measured on Zen 3, 2 threads, 256 rows
// of 1,024 against 32,768: 64 / 128 / 256 / 512 KB gave 74-77 / 90-98 / 105 / 103-110 GFLOP/s.)
static inline int64_t nl_linear_chunk_rows(int64_t h, int64_t n, int threads) {
  int64_t r = (512 << 10) / 4 / h;
  r = r < 8 ? 8 : r > 256 ? 256 : r;
  const int64_t even = (n + threads - 1) / (threads > 0 ? threads : 1);  // rows per thread
  return even < r ? (even < 8 ? 8 : even) : r;
}
int nl_linear_logprob_run(const float* hidden, int64_t h, const float* lm_head,
                          const nl_logprob_args* a, int32_t level, char* err, size_t errlen);

// ---------------------------------------------------------------- kernel internals
// nl_stats is the online state of one row (or part of one): m is the running max of y (-inf
// when empty), s = sum exp(y - m), t = sum exp(y - m) * (y - m). Then lse = m + log s and
// entropy = log s - t / s.
typedef struct {
  float m, s, t;
} nl_stats;

#define NL_STATS_EMPTY ((nl_stats){-INFINITY, 0.0f, 0.0f})

// nl_rescaled is a * (t + d * s): a sum of exp(y - m) * (y - m) moved to a new max d below m.
// When a == 0 (d = -inf, or so far down that exp underflows) the old terms vanish: 0, never
// 0 * inf = NaN. A NaN a gives 0 too; the NaN then reaches the outputs through s.
static inline float nl_rescaled(float a, float t, float d, float s) {
  return a > 0.0f ? a * (t + d * s) : 0.0f;
}

// nl_stats_push adds one value y: the scalar reference update, also used for SIMD tails.
static inline void nl_stats_push(nl_stats* st, float y) {
  if (y > st->m) {  // a new max (never for NaN: NaN goes to the else branch and poisons s)
    float d = st->m - y, a = st->s == 0.0f ? 0.0f : expf(d);
    st->t = nl_rescaled(a, st->t, d, st->s);
    st->s = a * st->s + 1.0f;
    st->m = y;
  } else if (y != -INFINITY) {
    float d = y - st->m, e = expf(d);
    st->s += e;
    if (e > 0.0f) st->t += e * d;  // e == 0 with d = -inf (y - m overflowed) adds nothing
  }
}

// nl_stats_merge folds the state (m, s, t) into st. An empty state (s == 0, not NaN) is a no-op.
static inline void nl_stats_merge(nl_stats* st, float m, float s, float t) {
  if (s == 0.0f) return;
  if (st->s == 0.0f) {
    st->m = m, st->s = s, st->t = t;
    return;
  }
  float mm = m > st->m ? m : st->m;
  float d1 = st->m - mm, d2 = m - mm, a1 = expf(d1), a2 = expf(d2);
  st->t = nl_rescaled(a1, st->t, d1, st->s) + nl_rescaled(a2, t, d2, s);
  st->s = a1 * st->s + a2 * s;
  st->m = mm;
}

// nl_load returns element i of a row of dtype as fp32.
static inline float nl_load(const void* row, int32_t dtype, int64_t i) {
  switch (dtype) {
    case NL_F16: return nl_half_to_float(((const uint16_t*)row)[i]);
    case NL_BF16: return nl_bf16_to_float(((const uint16_t*)row)[i]);
    default: return ((const float*)row)[i];
  }
}

// The SIMD kernels' exp: e^d = 2^n * p(r) with u = d * log2(e), n = round(u), r = u - n in
// [-1/2, 1/2], p the degree-5 polynomial below (weighted least-squares fit of 2^r; max relative
// error 1.5e-7 in float64 evaluation, measured over 200k points of [-1/2, 1/2]).
#define NL_LOG2E 1.44269504f
#define NL_EXP2_C0 1.0000001192092896f
#define NL_EXP2_C1 0.6931469440460205f
#define NL_EXP2_C2 0.24022121727466583f
#define NL_EXP2_C3 0.05550742521882057f
#define NL_EXP2_C4 0.009675459936261177f
#define NL_EXP2_C5 0.0013266970636323094f
// NL_EXP2_POLY evaluates that polynomial at r by Horner's rule with any vector width's fmadd and
// set1 intrinsics.
#define NL_EXP2_POLY(r, FMADD, SET1)                                                       \
  FMADD(FMADD(FMADD(FMADD(FMADD(SET1(NL_EXP2_C5), r, SET1(NL_EXP2_C4)), r, SET1(NL_EXP2_C3)), \
                    r, SET1(NL_EXP2_C2)),                                                 \
              r, SET1(NL_EXP2_C1)),                                                       \
        r, SET1(NL_EXP2_C0))

// Row kernels: fold y = row[0:len) * inv_t into *st. One per SIMD level; the AVX ones exist only
// when compiled for x86-64 (they carry their own target pragmas; callers check the CPU first).
void nl_stats_ref(const void* row, int32_t dtype, int64_t len, float inv_t, nl_stats* st);
void nl_stats_avx2(const void* row, int32_t dtype, int64_t len, float inv_t, nl_stats* st);
void nl_stats_avx512(const void* row, int32_t dtype, int64_t len, float inv_t, nl_stats* st);

// Shared by the entry points (logprob_run.c).
typedef void (*stats_fn)(const void*, int32_t, int64_t, float, nl_stats*);
stats_fn nl_stats_for(int32_t level);  // NULL for an unknown level
// nl_check_args validates everything but the logits/hidden buffers; 0, or -1 with err set.
int nl_check_args(const nl_logprob_args* a, int32_t level, char* err, size_t errlen);
// nl_finish_row writes row i's outputs from its state and its label's scaled logit.
void nl_finish_row(const nl_logprob_args* a, int64_t i, nl_stats st, float y_label);

#endif  // NEEDLE_LOGPROB_H
