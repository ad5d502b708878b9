// Package cpu picks the SIMD level every kernel package dispatches on: the best the CPU
// supports, or the one forced by NEEDLE_SIMD=ref|avx2|avx512|avx512vnni|avx512bf16|amx (a level the CPU lacks is an
// error naming the missing features, never a silent downgrade). The detection is cpu.c, the
// same code libneedle.so (capi/) runs, so Go and the C ABI always agree. Read once at start;
// safe for concurrent use.
package cpu

/*
#cgo CFLAGS: -O2 -std=c11 -Wall
#include <stdlib.h>
#include "cpu.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"
)

// Level is a SIMD level; higher is wider and needs every feature of the levels below.
type Level int

const (
	Ref    Level = C.NL_LEVEL_REF    // scalar C reference: the test oracle
	AVX2   Level = C.NL_LEVEL_AVX2   // AVX2 + FMA + F16C + BMI1/2 + POPCNT (Features lists all)
	AVX512 Level = C.NL_LEVEL_AVX512 // AVX2's features + AVX-512 F/BW/DQ/VL
	// AVX512VNNI, AVX512BF16 and AMX add the int8 and bf16 dot products and the tiles that only
	// the encoder's GEMMs use; every other kernel family runs its AVX-512 kernels there
	// (nl_cpu_at_most in cpu.h).
	AVX512VNNI Level = C.NL_LEVEL_AVX512VNNI // AVX512's features + AVX512_VNNI
	AVX512BF16 Level = C.NL_LEVEL_AVX512BF16 // AVX512VNNI's features + AVX512_BF16
	AMX        Level = C.NL_LEVEL_AMX        // AVX512BF16's + AMX-TILE, AMX-BF16, the OS's tile state and permission
	Top        Level = C.NL_LEVEL_TOP        // the highest level
)

func (l Level) String() string {
	if name := C.nl_cpu_level_name(C.int32_t(l)); name != nil {
		return C.GoString(name)
	}
	return "ref"
}

// call runs a cpu.c function that takes a NUL-terminated string and fills an error buffer.
func call(s string, f func(cs *C.char, err *C.char, n C.size_t) C.int32_t) (Level, error) {
	if strings.IndexByte(s, 0) >= 0 { // C would read only the part before the NUL
		return Ref, fmt.Errorf("SIMD level %q contains a NUL byte", s)
	}
	cs := C.CString(s)
	defer C.free(unsafe.Pointer(cs))
	var buf [512]C.char
	l := f(cs, &buf[0], C.size_t(len(buf)))
	if l < 0 {
		return Ref, errors.New(C.GoString(&buf[0]))
	}
	return Level(l), nil
}

// ParseLevel reads a NEEDLE_SIMD value.
func ParseLevel(s string) (Level, error) {
	return call(s, func(cs, err *C.char, n C.size_t) C.int32_t { return C.nl_cpu_parse(cs, err, n) })
}

// features lists what level l needs (missing: only what this CPU or its OS lacks).
func features(l Level, missing bool) []string {
	m := C.int(0)
	if missing {
		m = 1
	}
	var buf [512]C.char
	if C.nl_cpu_features(C.int32_t(l), m, &buf[0], C.size_t(len(buf))) <= 0 {
		return nil
	}
	return strings.Split(C.GoString(&buf[0]), ", ")
}

// Features lists every CPU feature level l needs, in GCC target spellings (avx2, fma, ...), plus
// os-ymm-state / os-zmm-state: the OS saves those registers (XCR0).
func Features(l Level) []string { return features(l, false) }

// Missing lists the features of l this CPU or its OS lacks; empty for l <= Supported().
func Missing(l Level) []string { return features(l, true) }

// supported is computed once: CPUID does not change under a running process.
var supported = Level(C.nl_cpu_supported())

// Supported is the best level this CPU runs.
func Supported() Level { return supported }

// Select is the level NEEDLE_SIMD=want selects: Supported() for "", else the level want names,
// or an error when it names none or one this CPU lacks.
func Select(want string) (Level, error) {
	return call(want, func(cs, err *C.char, n C.size_t) C.int32_t { return C.nl_cpu_select(cs, err, n) })
}

var selected = sync.OnceValues(func() (Level, error) { return Select(os.Getenv("NEEDLE_SIMD")) })

// Selected is the level kernels use: Select(NEEDLE_SIMD), read once.
func Selected() (Level, error) { return selected() }

// Levels lists every level this CPU runs, lowest first: what tests compare to Ref.
func Levels() []Level { return LevelsUpTo(Top) }

// LevelsUpTo lists the levels this CPU runs up to top: the distinct kernels of a family whose
// best kernels are of level top (the levels above it run those: nl_cpu_at_most in cpu.h).
func LevelsUpTo(top Level) []Level {
	var out []Level
	for l := Ref; l <= min(Supported(), top); l++ {
		out = append(out, l)
	}
	return out
}
