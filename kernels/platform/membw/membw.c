#include "membw.h"

// Four independent accumulators so the adds are never the bottleneck; -O3 vectorizes the loop.
uint64_t nl_membw_read(const uint64_t* words, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) a += words[i], b += words[i + 1], c += words[i + 2], d += words[i + 3];
  for (; i < n; i++) a += words[i];
  return a + b + c + d;
}
