// Package cpu picks the SIMD level every kernel package dispatches on: the best the CPU
// supports, or the one forced by NEEDLE_SIMD=ref|avx2|avx512 (a level the CPU lacks is an
// error, never a silent downgrade). Read once at start; safe for concurrent use.
package cpu

import (
	"fmt"
	"os"
	"sync"

	"github.com/klauspost/cpuid/v2"
)

// Level is a SIMD level; higher is wider.
type Level int

const (
	Ref    Level = iota // scalar C reference: the test oracle
	AVX2                // AVX2 + FMA + F16C
	AVX512              // AVX-512 F/BW/DQ/VL
)

func (l Level) String() string {
	switch l {
	case AVX2:
		return "avx2"
	case AVX512:
		return "avx512"
	}
	return "ref"
}

// ParseLevel reads a NEEDLE_SIMD value.
func ParseLevel(s string) (Level, error) {
	switch s {
	case "ref":
		return Ref, nil
	case "avx2":
		return AVX2, nil
	case "avx512":
		return AVX512, nil
	}
	return Ref, fmt.Errorf("unknown SIMD level %q (want ref, avx2 or avx512)", s)
}

// Supported is the best level this CPU runs.
func Supported() Level {
	switch {
	case cpuid.CPU.Supports(cpuid.AVX512F, cpuid.AVX512BW, cpuid.AVX512DQ, cpuid.AVX512VL):
		return AVX512
	case cpuid.CPU.Supports(cpuid.AVX2, cpuid.FMA3, cpuid.F16C):
		return AVX2
	}
	return Ref
}

var (
	once     sync.Once
	selected Level
	selErr   error
)

// Selected is the level kernels use: NEEDLE_SIMD if set (and supported), else Supported().
func Selected() (Level, error) {
	once.Do(func() {
		selected = Supported()
		if s := os.Getenv("NEEDLE_SIMD"); s != "" {
			l, err := ParseLevel(s)
			switch {
			case err != nil:
				selErr = fmt.Errorf("NEEDLE_SIMD: %w", err)
			case l > selected:
				selErr = fmt.Errorf("NEEDLE_SIMD=%s: this CPU supports at most %s", s, selected)
			default:
				selected = l
			}
		}
	})
	return selected, selErr
}

// Levels lists every level this CPU runs, lowest first: what tests compare to Ref.
func Levels() []Level {
	var out []Level
	for l := Ref; l <= Supported(); l++ {
		out = append(out, l)
	}
	return out
}
