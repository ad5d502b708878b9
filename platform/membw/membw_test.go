package membw

import (
	"fmt"
	"testing"

	"needle/platform/cpu"
)

// TestSumReadsEveryWord checks the C kernel of every level against a Go loop on lengths around
// the unrolls (4 words scalar; two streams of whole 16-word AVX2 / 32-word AVX-512 steps) and
// around the length where the second stream starts 37 pages (18,944 words) before the half.
func TestSumReadsEveryWord(t *testing.T) {
	for _, l := range cpu.LevelsUpTo(cpu.AVX512) {
		for _, n := range []int{0, 1, 3, 4, 5, 31, 32, 33, 47, 63, 64, 65, 127, 128, 1001, 75775, 75776, 75777, 75840, 75841, 200003} {
			w := make([]uint64, n)
			var want uint64
			for i := range w {
				w[i] = uint64(i+1) * 0xdeadbeefcafe
				want += w[i]
			}
			if got := SumAt(l, w); got != want {
				t.Fatalf("%s: Sum of %d words = %#x, want %#x", l, n, got, want)
			}
		}
	}
}

func TestThreadedReadCoversBuffer(t *testing.T) {
	b, err := NewBuffer(1<<20 + 8*7)
	if err != nil {
		t.Fatal(err)
	}
	want := SumAt(cpu.Ref, b.words)
	for _, l := range cpu.LevelsUpTo(cpu.AVX512) {
		for _, threads := range []int{0, 1, 2, 3} {
			if _, got := b.readAt(l, threads); got != want {
				t.Fatalf("%s: Read(%d) sum %#x, want %#x", l, threads, got, want)
			}
		}
	}
	if bw := b.Bandwidth(2, 2); !(bw > 0) {
		t.Fatalf("Bandwidth = %v", bw)
	}
	if _, err := NewBuffer(7); err == nil {
		t.Fatal("NewBuffer(7) accepted")
	}
}

// BenchmarkRead: one thread reading 256 MiB (far above the L3) at each level; MB/s is the
// read bandwidth each loop measures (the reference level is a plain C sum, the baseline the vector loops are read against).
func BenchmarkRead(b *testing.B) {
	buf, err := NewBuffer(256 << 20)
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range cpu.LevelsUpTo(cpu.AVX512) {
		b.Run(fmt.Sprint(l), func(b *testing.B) {
			b.SetBytes(buf.Bytes())
			for b.Loop() {
				buf.readAt(l, 1)
			}
		})
	}
}
