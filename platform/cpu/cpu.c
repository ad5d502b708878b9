// CPU features per SIMD level (cpu.h). The table lists every feature the kernels of a level are
// compiled for: the target attributes and pragmas of kernels/*/*/*_<level>.c (a test
// of the Go package, cpu_test.go, checks that each of those features is listed here), plus the
// register state the OS must save (XCR0) for the CPU's AVX, AVX-512 or tile registers to be usable,
// and for tiles the process's permission (Linux grants it on request: arch_prctl, below).
#define _DEFAULT_SOURCE  // syscall() under -std=c11
#include "cpu.h"

#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static const char* const level_names[] = {"ref", "avx2", "avx512", "avx512vnni", "avx512bf16", "amx"};

// Where a feature bit is read.
// TILE_PERM is not a register: 1 when the process may use the tile registers.
enum { LEAF1_ECX, LEAF7_EBX, LEAF7_ECX, LEAF7_EDX, LEAF7_1_EAX, XCR0, TILE_PERM, NREGS };

typedef struct {
  const char* name;  // the GCC target spelling, os-*-state for XCR0 bits, os-tile-permission
  int32_t level;     // the lowest level that needs it
  int reg;           // LEAF1_ECX, ... XCR0
  uint32_t mask;     // all of these bits set
} feature;

static const feature features[] = {
    {"avx", NL_LEVEL_AVX2, LEAF1_ECX, 1u << 28},
    {"avx2", NL_LEVEL_AVX2, LEAF7_EBX, 1u << 5},
    {"fma", NL_LEVEL_AVX2, LEAF1_ECX, 1u << 12},
    {"f16c", NL_LEVEL_AVX2, LEAF1_ECX, 1u << 29},
    {"bmi", NL_LEVEL_AVX2, LEAF7_EBX, 1u << 3},
    {"bmi2", NL_LEVEL_AVX2, LEAF7_EBX, 1u << 8},
    {"popcnt", NL_LEVEL_AVX2, LEAF1_ECX, 1u << 23},
    {"os-ymm-state", NL_LEVEL_AVX2, XCR0, 0x6},  // SSE + upper YMM halves
    {"avx512f", NL_LEVEL_AVX512, LEAF7_EBX, 1u << 16},
    {"avx512dq", NL_LEVEL_AVX512, LEAF7_EBX, 1u << 17},
    {"avx512bw", NL_LEVEL_AVX512, LEAF7_EBX, 1u << 30},
    {"avx512vl", NL_LEVEL_AVX512, LEAF7_EBX, 1u << 31},
    {"os-zmm-state", NL_LEVEL_AVX512, XCR0, 0xe0},  // opmask + upper ZMM halves + ZMM16-31
    {"avx512vnni", NL_LEVEL_AVX512VNNI, LEAF7_ECX, 1u << 11},
    {"avx512bf16", NL_LEVEL_AVX512BF16, LEAF7_1_EAX, 1u << 5},
    {"amx-tile", NL_LEVEL_AMX, LEAF7_EDX, 1u << 24},
    {"amx-bf16", NL_LEVEL_AMX, LEAF7_EDX, 1u << 22},
    {"os-tile-state", NL_LEVEL_AMX, XCR0, 0x60000},  // XTILECFG + XTILEDATA
    {"os-tile-permission", NL_LEVEL_AMX, TILE_PERM, 1},
};
#define NFEATURES (sizeof features / sizeof features[0])

// read_regs fills regs[LEAF1_ECX ... XCR0]; zeros where the CPU has no such leaf, the OS does not
// enable XGETBV (OSXSAVE), or the CPU is not x86.
static void read_regs(uint32_t regs[NREGS]) {
  memset(regs, 0, NREGS * sizeof regs[0]);
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (__get_cpuid(1, &a, &b, &c, &d)) regs[LEAF1_ECX] = c;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    regs[LEAF7_EBX] = b;
    regs[LEAF7_ECX] = c;
    regs[LEAF7_EDX] = d;
    if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) regs[LEAF7_1_EAX] = a;  // a: max subleaf
  }
  if (regs[LEAF1_ECX] & (1u << 27)) {  // OSXSAVE
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    regs[XCR0] = lo;
  }
#endif
#if defined(__linux__) && defined(__x86_64__)
  // Linux leaves the tile data state off until the process asks (ARCH_REQ_XCOMP_PERM for
  // XFEATURE_XTILEDATA, 18): granted once for every thread, asking again is a no-op. Asked only
  // where the CPU and the OS have tiles. The grant adds the 8 KiB tile state to this process's
  // signal frames (Linux refuses it if a thread's alternate signal stack is too small for
  // them; Go's are 32 KiB).
  if ((regs[LEAF7_EDX] & (1u << 24)) && (regs[XCR0] & 0x60000) == 0x60000)
    regs[TILE_PERM] = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#endif
}

static int has(const feature* f, const uint32_t regs[NREGS]) {
  return (regs[f->reg] & f->mask) == f->mask;
}

const char* nl_cpu_level_name(int32_t level) {
  return level >= NL_LEVEL_REF && level <= NL_LEVEL_TOP ? level_names[level] : NULL;
}

int32_t nl_cpu_parse(const char* name, char* err, size_t errlen) {
  for (int32_t l = NL_LEVEL_REF; l <= NL_LEVEL_TOP; l++) {
    if (name && strcmp(name, level_names[l]) == 0) return l;
  }
  snprintf(err, errlen, "unknown SIMD level \"%.32s\" (want ref, avx2, avx512, avx512vnni, avx512bf16 or amx)",
           name ? name : "");
  return -1;
}

int32_t nl_cpu_features(int32_t level, int missing_only, char* buf, size_t len) {
  if (!nl_cpu_level_name(level)) return -1;
  uint32_t regs[NREGS];
  read_regs(regs);
  int32_t n = 0;
  size_t used = 0;
  if (len > 0) buf[0] = 0;
  for (size_t i = 0; i < NFEATURES; i++) {
    if (features[i].level > level || (missing_only && has(&features[i], regs))) continue;
    if (used < len) {
      int w = snprintf(buf + used, len - used, "%s%s", n ? ", " : "", features[i].name);
      used += w > 0 ? (size_t)w : 0;
    }
    n++;
  }
  return n;
}

int32_t nl_cpu_supported(void) {
  int32_t best = NL_LEVEL_TOP;
  while (best > NL_LEVEL_REF && nl_cpu_features(best, 1, NULL, 0) > 0) best--;
  return best;
}

int32_t nl_cpu_select(const char* want, char* err, size_t errlen) {
  int32_t best = nl_cpu_supported();
  if (!want || !*want) return best;
  int n = snprintf(err, errlen, "NEEDLE_SIMD: ");
  size_t used = n > 0 && (size_t)n < errlen ? (size_t)n : errlen;
  int32_t level = nl_cpu_parse(want, err ? err + used : NULL, errlen - used);
  if (level < 0 || level <= best) return level;
  char missing[256];
  nl_cpu_features(level, 1, missing, sizeof missing);
  snprintf(err, errlen, "NEEDLE_SIMD=%s: this CPU supports at most %s (%s needs %s)", want,
           level_names[best], want, missing);
  return -1;
}
