// membw.h: a memory read kernel for measuring read bandwidth.
#ifndef NEEDLE_MEMBW_H
#define NEEDLE_MEMBW_H

#include <stddef.h>
#include <stdint.h>

#include "../cpu/cpu.h"  // NL_LEVEL_*

// nl_membw_read returns the wrapping sum of words[0:n): every word is read once, and the sum
// keeps the compiler from dropping the reads. level is the SIMD level (NL_LEVEL_*, the same
// dispatch as every kernel): the vector loops load a full register per instruction from two
// streams, as the bandwidth-bound kernels do, so the yardstick reads at least as fast as they
// can. An unknown level reads with the reference.
uint64_t nl_membw_read(int32_t level, const uint64_t* words, size_t n);

#endif
