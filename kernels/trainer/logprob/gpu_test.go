package logprob

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"needle/cuda"
	"needle/internal/testenv"
)

// TestPTXEmbedded checks that the build embedded the PTX of logprob.cu with all three entry
// points. Under `make test` (NEEDLE_STRICT=1, after make native) a missing PTX fails.
func TestPTXEmbedded(t *testing.T) {
	ptx, err := PTX()
	if err != nil {
		testenv.Missing(t, fmt.Sprintf("the embedded PTX (%v)", err))
	}
	text := string(ptx)
	if !strings.Contains(text, ".target sm_80") {
		t.Error("PTX does not target sm_80")
	}
	for _, name := range cudaKernels {
		if !strings.Contains(text, ".entry "+name+"(") {
			t.Errorf("PTX has no entry %s", name)
		}
	}
}

// TestGPUMatchesReference runs logprob.cu on a real GPU against the float64 reference. Without
// a CUDA device it skips with cuda.Open's reason, also under NEEDLE_STRICT=1: a machine without
// a GPU is a supported setup, not a missing resource (cuda_test.go covers that path).
func TestGPUMatchesReference(t *testing.T) {
	g := openGPU(t)
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

// openGPU loads logprob.cu on device 0 for the test's duration, or skips the test (benchmark)
// with cuda.Open's reason when there is no device; any other failure fails it.
func openGPU(tb testing.TB) *GPU {
	dev, err := cuda.Open(0)
	if err != nil {
		if !errors.Is(err, cuda.ErrNoDevice) {
			tb.Fatalf("cuda.Open: %v, want ErrNoDevice", err)
		}
		tb.Skipf("runs only on a CUDA device; %v", err)
	}
	tb.Cleanup(func() { dev.Close() })
	g, err := NewGPU(dev)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	return g
}
