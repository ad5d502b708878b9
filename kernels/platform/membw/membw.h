// membw.h: a memory read kernel for measuring read bandwidth.
#ifndef NEEDLE_MEMBW_H
#define NEEDLE_MEMBW_H

#include <stddef.h>
#include <stdint.h>

// nl_membw_read returns the wrapping sum of words[0:n): every word is read once, and the sum
// keeps the compiler from dropping the reads.
uint64_t nl_membw_read(const uint64_t* words, size_t n);

#endif
