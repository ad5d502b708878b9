package nngpu

import (
	"testing"

	"needle/testkit/cudatest"
)

// TestPTX checks, without a GPU, that the embedded PTX and fatbin hold every kernel the
// launchers name for the GPUs needle targets. The kernels' numbers are tested by ctest
// nngpu_cuda_emu (on the CPU) and encoder/bert's GPU parity test.
func TestPTX(t *testing.T) {
	cudatest.CheckKernels(t, ptxFiles, kernelStem, Entries...)
}

// TestGPULoad loads the kernels on a GPU (skips without one).
func TestGPULoad(t *testing.T) {
	k := cudatest.Open(t, Load)
	t.Logf("loaded %s", k.mod.Image)
}
