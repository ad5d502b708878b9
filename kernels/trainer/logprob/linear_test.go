package logprob

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"needle/platform/cpu"
)

// TestLinearMatchesUnfused checks the fused op against Compute on the materialized logits, and
// both against the float64 reference, on shapes that cross the row (256) and vocab (4096) chunks.
func TestLinearMatchesUnfused(t *testing.T) {
	shapes := []struct{ rows, h, vocab int }{{0, 8, 10}, {1, 1, 1}, {3, 33, 17}, {300, 16, 4097}, {5, 64, 9000}}
	for _, level := range cpu.LevelsUpTo(cpu.AVX512) {
		for si, s := range shapes {
			name := fmt.Sprintf("%v/%dx%dx%d", level, s.rows, s.h, s.vocab)
			r := rand.New(rand.NewSource(int64(si)))
			hidden, lmHead := make([]float32, s.rows*s.h), make([]float32, s.vocab*s.h)
			for i := range hidden {
				hidden[i] = float32(r.NormFloat64())
			}
			for i := range lmHead {
				lmHead[i] = float32(r.NormFloat64() / math.Sqrt(float64(s.h)))
			}
			labels := make([]int64, s.rows)
			for i := range labels {
				labels[i] = int64(r.Intn(s.vocab))
				if i%5 == 4 {
					labels[i] = DefaultIgnoreIndex
				}
			}
			// The logits in float64, rounded once to fp32 for the unfused path.
			vals := make([]float64, s.rows*s.vocab)
			for i := 0; i < s.rows; i++ {
				for j := 0; j < s.vocab; j++ {
					var dot float64
					for k := 0; k < s.h; k++ {
						dot += float64(hidden[i*s.h+k]) * float64(lmHead[j*s.h+k])
					}
					vals[i*s.vocab+j] = dot
				}
			}
			opt := DefaultOptions()
			opt.Temperature = 0.9
			fused, unfused := newOutput(s.rows), newOutput(s.rows)
			if err := LinearComputeAt(level, hidden, s.rows, s.h, lmHead, s.vocab, labels, opt, fused); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			in := encode(F32, s.rows, s.vocab, vals)
			if err := ComputeAt(level, in.x, labels, opt, unfused); err != nil {
				t.Fatalf("%s unfused: %v", name, err)
			}
			lp, ent, lse := reference(s.rows, s.vocab, vals, labels, 0.9, DefaultIgnoreIndex)
			compare(t, name+" fused vs float64", fused, lp, ent, lse)
			for i := 0; i < s.rows; i++ {
				if !close(fused.Logprob[i], float64(unfused.Logprob[i])) || !close(fused.Entropy[i], float64(unfused.Entropy[i])) || !close(fused.LSE[i], float64(unfused.LSE[i])) {
					t.Errorf("%s row %d: fused %v/%v/%v, unfused %v/%v/%v", name, i, fused.Logprob[i], fused.Entropy[i], fused.LSE[i], unfused.Logprob[i], unfused.Entropy[i], unfused.LSE[i])
				}
			}
		}
	}
}

func TestLinearBadInput(t *testing.T) {
	hidden, lmHead, labels := make([]float32, 2*4), make([]float32, 3*4), []int64{0, 2}
	out := Output{Logprob: make([]float32, 2)}
	opt := DefaultOptions()
	cases := []struct {
		name string
		err  error
	}{
		{"short hidden", LinearCompute(hidden[:7], 2, 4, lmHead, 3, labels, opt, out)},
		{"short lm_head", LinearCompute(hidden, 2, 4, lmHead[:11], 3, labels, opt, out)},
		{"zero h", LinearCompute(nil, 2, 0, nil, 3, labels, opt, out)},
		{"label", LinearCompute(hidden, 2, 4, lmHead, 3, []int64{0, 3}, opt, out)},
		{"temperature", LinearCompute(hidden, 2, 4, lmHead, 3, labels, Options{Temperature: -2, IgnoreIndex: -100}, out)},
	}
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}
