package delta

import (
	"fmt"
	"testing"

	"needle/kernels/platform/cpu"
)

// BenchmarkEncode: bytes/s counts both inputs (2 x tensor), the bytes encode reads.
func BenchmarkEncode(b *testing.B) {
	oldBits, newBits := pair(32<<20, 2, 0.01, 1)
	for _, l := range cpu.Levels() {
		b.Run(fmt.Sprintf("bf16-1pct-%s", l), func(b *testing.B) {
			var s Sparse
			b.SetBytes(int64(2 * len(oldBits)))
			b.ReportAllocs()
			for b.Loop() {
				if err := encode(l, &s, oldBits, newBits, 2, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkApply: bytes/s counts the tensor the delta is applied to.
func BenchmarkApply(b *testing.B) {
	oldBits, newBits := pair(32<<20, 2, 0.01, 1)
	var s Sparse
	if err := Encode(&s, oldBits, newBits, 2, 1); err != nil {
		b.Fatal(err)
	}
	base := make([]byte, len(oldBits))
	b.SetBytes(int64(len(base)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Apply(base, &s, 1); err != nil {
			b.Fatal(err)
		}
	}
}
