package membw

import "testing"

// TestSumReadsEveryWord checks the C kernel against a Go loop on lengths around its unroll.
func TestSumReadsEveryWord(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 5, 1001} {
		w := make([]uint64, n)
		var want uint64
		for i := range w {
			w[i] = uint64(i+1) * 0xdeadbeefcafe
			want += w[i]
		}
		if got := Sum(w); got != want {
			t.Fatalf("Sum of %d words = %#x, want %#x", n, got, want)
		}
	}
}

func TestThreadedReadCoversBuffer(t *testing.T) {
	b, err := NewBuffer(1<<20 + 8*7)
	if err != nil {
		t.Fatal(err)
	}
	want := Sum(b.words)
	for _, threads := range []int{0, 1, 2, 3} {
		if _, got := b.Read(threads); got != want {
			t.Fatalf("Read(%d) sum %#x, want %#x", threads, got, want)
		}
	}
	if bw := b.Bandwidth(2, 2); !(bw > 0) {
		t.Fatalf("Bandwidth = %v", bw)
	}
	if _, err := NewBuffer(7); err == nil {
		t.Fatal("NewBuffer(7) accepted")
	}
}
