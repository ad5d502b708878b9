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

// 8 loads (256 bytes) per step into 4 accumulators: the loads, not the adds, set the pace.
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint64_t* words, size_t n) {
  __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                    _mm256_setzero_si256()};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i* p = (const __m256i*)(words + i);
    for (int k = 0; k < 4; k++)
      acc[k] = _mm256_add_epi64(acc[k], _mm256_add_epi64(_mm256_loadu_si256(p + k),
                                                         _mm256_loadu_si256(p + k + 4)));
  }
  __m256i s = _mm256_add_epi64(_mm256_add_epi64(acc[0], acc[1]), _mm256_add_epi64(acc[2], acc[3]));
  uint64_t lanes[4];
  _mm256_storeu_si256((__m256i*)lanes, s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] + read_ref(words + i, n - i);
}

// 8 loads (512 bytes) per step into 4 accumulators.
__attribute__((target("avx512f"))) static uint64_t read_avx512(const uint64_t* words, size_t n) {
  __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                    _mm512_setzero_si512()};
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const uint64_t* p = words + i;
    for (int k = 0; k < 4; k++)
      acc[k] = _mm512_add_epi64(acc[k], _mm512_add_epi64(_mm512_loadu_si512(p + 8 * k),
                                                         _mm512_loadu_si512(p + 8 * k + 32)));
  }
  __m512i s = _mm512_add_epi64(_mm512_add_epi64(acc[0], acc[1]), _mm512_add_epi64(acc[2], acc[3]));
  return (uint64_t)_mm512_reduce_add_epi64(s) + read_ref(words + i, n - i);
}

uint64_t nl_membw_read(int32_t level, const uint64_t* words, size_t n) {
  switch (level) {
    case 1: return read_avx2(words, n);
    case 2: return read_avx512(words, n);
  }
  return read_ref(words, n);
}
