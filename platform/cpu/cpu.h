// cpu.h: the SIMD levels every needle kernel dispatches on, and the one CPU-feature check behind
// them. cpu.c is compiled into Go package needle/platform/cpu (cgo) and into libneedle.so
// (capi/), so Go and the C ABI pick a level with the same code. Pure C11, thread-safe, no
// allocation; error messages are copied into the caller's buffer.
#ifndef NEEDLE_CPU_H
#define NEEDLE_CPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Levels, lowest first; a level needs every feature of the levels below it (cpu.c lists them).
// AVX512VNNI adds the int8/int16 dot-product instructions (Cascade Lake, Ice Lake), AVX512BF16
// the bf16 ones (Cooper Lake, Sapphire Rapids, Zen 4), AMX the tile registers and their bf16
// multiply (Sapphire Rapids and later Xeons; the OS must grant the process the tile state): only
// the encoder's GEMMs (kernels/bert/nn) have kernels of their own there; every other kernel
// family runs its AVX-512 kernels at those levels (nl_cpu_at_most).
enum {
  NL_LEVEL_REF = 0,
  NL_LEVEL_AVX2 = 1,
  NL_LEVEL_AVX512 = 2,
  NL_LEVEL_AVX512VNNI = 3,
  NL_LEVEL_AVX512BF16 = 4,
  NL_LEVEL_AMX = 5,
  NL_LEVEL_TOP = NL_LEVEL_AMX
};

// nl_cpu_at_most is the level a kernel family whose best kernels are of level top runs at `level`
// (an unknown level stays unknown).
static inline int32_t nl_cpu_at_most(int32_t level, int32_t top) {
  return level > top && level <= NL_LEVEL_TOP ? top : level;
}

// nl_cpu_level_name is "ref", "avx2", "avx512", "avx512vnni", "avx512bf16" or "amx" (the NEEDLE_SIMD
// spellings); NULL for an unknown level.
const char* nl_cpu_level_name(int32_t level);

// nl_cpu_parse returns the level a NEEDLE_SIMD spelling names, or -1 with a message in err.
int32_t nl_cpu_parse(const char* name, char* err, size_t errlen);

// nl_cpu_features copies into buf the comma-separated features `level` needs (missing_only: only
// those this CPU or its OS lacks) and returns how many there are (-1 for an unknown level).
int32_t nl_cpu_features(int32_t level, int missing_only, char* buf, size_t len);

// nl_cpu_supported is the highest level with no feature missing.
int32_t nl_cpu_supported(void);

// nl_cpu_select is the level kernels use for NEEDLE_SIMD value want: nl_cpu_supported() when
// want is NULL or empty, else the level it names. -1 with a message in err when want names no
// level or one this CPU lacks (the message names the missing features).
int32_t nl_cpu_select(const char* want, char* err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
