// delta_launch.h: delta.cu's launch shape, defined once for the kernels (delta.cu), their C
// launcher (delta_gpu.c, which Go's delta.GPU and libneedle's needle_cuda_delta_* run) and Go
// (cgo: C.NL_DELTA_TILE).
#ifndef NEEDLE_DELTA_LAUNCH_H
#define NEEDLE_DELTA_LAUNCH_H

// Threads per block of every launch. The kernels take any multiple of 32 up to 1024 (their
// full-mask shuffles need whole warps); this is the one the launcher uses.
#define NL_DELTA_BLOCK 256
// Elements per thread per tile: block b of count and write owns elements
// [b * blockDim.x * NL_DELTA_ITEMS, (b + 1) * blockDim.x * NL_DELTA_ITEMS).
#define NL_DELTA_ITEMS 8
// Elements per tile at NL_DELTA_BLOCK threads: the launcher's grid is ceil(n / NL_DELTA_TILE).
#define NL_DELTA_TILE (NL_DELTA_BLOCK * NL_DELTA_ITEMS)
// Blocks of an apply launch at most (apply strides over its entries: enough to fill any GPU).
#define NL_DELTA_APPLY_BLOCKS 65536

#endif
