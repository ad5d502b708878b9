#include "membw.h"

#include <immintrin.h>

// The scalar reference (and the tails): four independent accumulators so the adds are never
// the bottleneck. Not vectorized (cgo builds without -mavx2, so -O3 would give SSE2).
__attribute__((optimize("no-tree-vectorize"))) static uint64_t read_ref(const uint64_t* words,
                                                                         size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) a += words[i], b += words[i + 1], c += words[i + 2], d += words[i + 3];
  for (; i < n; i++) a += words[i];
  return a + b + c + d;
}

// The vector loops read two streams in step, 4 loads from each per step into 4 accumulators (the
// loads, not the adds, set the pace). Two streams, as delta encode reads old and new: on Zen 3
// (1 thread, 512 MiB, AVX2) they read 10-15% faster than one stream, and faster than software
// prefetch or four streams did, so no two-stream kernel outruns its yardstick.
//
// The second stream starts SPLIT_SHIFT words before the half: streams a multiple of 256 MiB
// apart contend for the same DRAM banks, and at the half of a 512 MiB or 1 GiB buffer they are.
// Measured on Zen 4 (1 thread, CPU time, AVX2 loop, 4 KiB / 2 MiB pages): 256 MiB apart 15 / 18
// GB/s; 4 KiB less 25 / 29; 12 KiB, 64 KiB or 37 pages less 25-26 / 32-33, as fast as 128 MiB
// apart. The words past the two streams' whole steps (37 pages, 148 KiB, and the odd ends) go to
// the reference.
#define SPLIT_SHIFT (37 * 512)

// split returns the length of each of the two streams for n words read in steps of step words.
static size_t split(size_t n, size_t step) {
  size_t half = n / 2 / step * step;
  return half > 2 * SPLIT_SHIFT ? half - SPLIT_SHIFT : half;  // SPLIT_SHIFT is whole steps
}

__attribute__((target("avx2"))) static uint64_t read_avx2(const uint64_t* words, size_t n) {
  __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                    _mm256_setzero_si256()};
  size_t len = split(n, 16);  // whole steps of 16 words (4 vectors) per stream
  const uint64_t* second = words + len;
  for (size_t i = 0; i < len; i += 16) {
    const __m256i *p = (const __m256i*)(words + i), *q = (const __m256i*)(second + i);
    for (int k = 0; k < 4; k++)
      acc[k] = _mm256_add_epi64(acc[k], _mm256_add_epi64(_mm256_loadu_si256(p + k),
                                                         _mm256_loadu_si256(q + k)));
  }
  __m256i s = _mm256_add_epi64(_mm256_add_epi64(acc[0], acc[1]), _mm256_add_epi64(acc[2], acc[3]));
  uint64_t lanes[4];
  _mm256_storeu_si256((__m256i*)lanes, s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] + read_ref(words + 2 * len, n - 2 * len);
}

__attribute__((target("avx512f"))) static uint64_t read_avx512(const uint64_t* words, size_t n) {
  __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                    _mm512_setzero_si512()};
  size_t len = split(n, 32);  // whole steps of 32 words (4 vectors) per stream
  const uint64_t* second = words + len;
  for (size_t i = 0; i < len; i += 32) {
    for (int k = 0; k < 4; k++)
      acc[k] = _mm512_add_epi64(acc[k], _mm512_add_epi64(_mm512_loadu_si512(words + i + 8 * k),
                                                         _mm512_loadu_si512(second + i + 8 * k)));
  }
  __m512i s = _mm512_add_epi64(_mm512_add_epi64(acc[0], acc[1]), _mm512_add_epi64(acc[2], acc[3]));
  return (uint64_t)_mm512_reduce_add_epi64(s) + read_ref(words + 2 * len, n - 2 * len);
}

uint64_t nl_membw_read(int32_t level, const uint64_t* words, size_t n) {
  switch (nl_cpu_at_most(level, NL_LEVEL_AVX512)) {
    case NL_LEVEL_AVX2: return read_avx2(words, n);
    case NL_LEVEL_AVX512: return read_avx512(words, n);
  }
  return read_ref(words, n);
}
