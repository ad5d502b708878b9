package logprob

import (
	"strings"
	"testing"

	"needle/testkit/cudatest"
)

// TestPTXEmbedded checks that the build embedded the PTX and the fatbin of logprob.cu with all
// three entry points.
func TestPTXEmbedded(t *testing.T) {
	cudatest.CheckKernels(t, ptxFiles, kernelStem, "nl_cuda_logprob_f32", "nl_cuda_logprob_f16", "nl_cuda_logprob_bf16")
}

// TestGPUMatchesReference runs logprob.cu on a real GPU against the float64 reference. Without
// a CUDA device it skips with cuda.Open's reason, also under NEEDLE_STRICT=1: a machine without
// a GPU is a supported setup, not a missing resource (cuda_test.go covers that path).
func TestGPUMatchesReference(t *testing.T) {
	g := cudatest.Open(t, NewGPU)
	t.Logf("kernels: %s", g.mod.Image)
	for ci, c := range shapeCases {
		t.Run(c.name, func(t *testing.T) {
			for _, dtype := range []DType{F32, F16, BF16} {
				in, labels := c.build(dtype, int64(ci))
				out := newOutput(c.rows)
				if err := g.Compute(in.x, labels, DefaultOptions(), out); err != nil {
					t.Fatalf("%s %v: %v", c.name, dtype, err)
				}
				lp, ent, lse := reference(c.rows, c.vocab, in.vals, labels, 1, DefaultIgnoreIndex)
				compare(t, "gpu/"+c.name+"/"+dtype.String(), out, lp, ent, lse)
			}
		})
	}
}

// TestWithoutGPUEmulatedDriver runs TestGPUMatchesReference through package cuda against the
// emulated driver (libcudaemu_driver.so: logprob.cu under cudaemu on the CPU): the launch's
// argument layout, sizes and copies, not the GPU (that is the GPU check's). Once with every case
// loading the fatbin, and once with the fatbin refused, so the PTX fallback loads, on one case
// (the emulated kernels are the same code whichever image the driver was given).
func TestWithoutGPUEmulatedDriver(t *testing.T) {
	if out := cudatest.RunEmulated(t, "TestGPUMatchesReference"); !strings.Contains(out, "kernels: ptx/logprob.fatbin") {
		t.Errorf("the fatbin was not the image loaded:\n%s", out)
	}
	if out := cudatest.RunEmulated(t, "TestGPUMatchesReference/odd-vocab", "CUDAEMU_REFUSE=fatbin"); !strings.Contains(out, "kernels: ptx/logprob_sm80.ptx") {
		t.Errorf("a refused fatbin did not fall back to the PTX:\n%s", out)
	}
}
