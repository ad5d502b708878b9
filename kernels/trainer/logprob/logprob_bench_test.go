package logprob

import (
	"math/rand"
	"testing"

	"needle/platform/cpu"
)

// BenchmarkCompute: bf16 logits of Qwen2.5's vocab, one thread, per SIMD level. SetBytes is the
// logits size, so MB/s reads as the logits read rate.
func BenchmarkCompute(b *testing.B) {
	const rows, vocab = 16, 151936
	vals := make([]float64, rows*vocab)
	r := rand.New(rand.NewSource(1))
	for i := range vals {
		vals[i] = r.NormFloat64() * 3
	}
	in := encode(BF16, rows, vocab, vals)
	labels := make([]int64, rows)
	out := newOutput(rows)
	for _, level := range cpu.LevelsUpTo(cpu.AVX512) {
		b.Run(level.String(), func(b *testing.B) {
			b.SetBytes(int64(len(in.x.Data)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := ComputeAt(level, in.x, labels, DefaultOptions(), out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(rows*vocab)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
		})
	}
}

// TestComputeDoesNotAllocate: the hot path is one cgo call on the caller's buffers.
func TestComputeDoesNotAllocate(t *testing.T) {
	in, labels := shapeCases[5].build(BF16, 3)
	out := newOutput(in.rows)
	allocs := testing.AllocsPerRun(20, func() {
		if err := Compute(in.x, labels, DefaultOptions(), out); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Compute allocates %v times per call", allocs)
	}
}

// BenchmarkLinearCompute: the fused op on 256 rows of hidden size 1,024 against a 32,768-row
// lm_head (fp32), at the selected level on OpenMP's threads. GFLOP/s counts the logits'
// multiply-adds (2 per element of each dot product).
func BenchmarkLinearCompute(b *testing.B) {
	const rows, h, vocab = 256, 1024, 32768
	r := rand.New(rand.NewSource(2))
	hidden, lmHead := make([]float32, rows*h), make([]float32, vocab*h)
	for i := range hidden {
		hidden[i] = float32(r.NormFloat64())
	}
	for i := range lmHead {
		lmHead[i] = float32(r.NormFloat64() * 0.03)
	}
	labels := make([]int64, rows)
	for i := range labels {
		labels[i] = r.Int63n(vocab)
	}
	out := newOutput(rows)
	opt := DefaultOptions()
	opt.Threads = 0 // OpenMP's team
	for b.Loop() {
		if err := LinearCompute(hidden, rows, h, lmHead, vocab, labels, opt, out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(2*float64(rows)*h*vocab*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
