// nngpu_launch.h: nngpu.cu's launch shapes, defined once for the kernels (nngpu.cu) and Go's
// launchers (nngpu.go, through cgo: C.NG_BLOCK).
#ifndef NEEDLE_NNGPU_LAUNCH_H
#define NEEDLE_NNGPU_LAUNCH_H

#define NG_BLOCK 256                       // threads of the row kernels (a multiple of 32)
#define NG_MAX_HIDDEN (16 * NG_BLOCK)      // row width the row kernels hold in registers
#define NG_ATT_QUERIES 64                  // queries (threads) per attention block
#define NG_ATT_KEYS 64                     // keys per shared-memory chunk of the attention

#endif
