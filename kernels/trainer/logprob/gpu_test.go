package logprob

import (
	"testing"

	"needle/cuda/cudatest"
)

// TestPTXEmbedded checks that the build embedded the PTX and the fatbin of logprob.cu with all
// three entry points.
func TestPTXEmbedded(t *testing.T) {
	var entries []string
	for _, name := range cudaKernels {
		entries = append(entries, name)
	}
	cudatest.CheckKernels(t, ptxFiles, kernelStem, entries...)
}

// TestGPUMatchesReference runs logprob.cu on a real GPU against the float64 reference. Without
// a CUDA device it skips with cuda.Open's reason, also under NEEDLE_STRICT=1: a machine without
// a GPU is a supported setup, not a missing resource (cuda_test.go covers that path).
func TestGPUMatchesReference(t *testing.T) {
	g := cudatest.Open(t, NewGPU)
	for ci, c := range shapeCases {
		for _, dtype := range []DType{F32, F16, BF16} {
			in, labels := c.build(dtype, int64(ci))
			out := newOutput(c.rows)
			if err := g.Compute(in.x, labels, DefaultOptions(), out); err != nil {
				t.Fatalf("%s %v: %v", c.name, dtype, err)
			}
			lp, ent, lse := reference(c.rows, c.vocab, in.vals, labels, 1, DefaultIgnoreIndex)
			compare(t, "gpu/"+c.name+"/"+dtype.String(), out, lp, ent, lse)
		}
	}
}
