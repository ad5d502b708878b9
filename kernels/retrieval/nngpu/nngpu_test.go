package nngpu

import (
	"testing"

	"needle/cuda/cudatest"
)

// TestPTX checks, without a GPU, that the embedded PTX targets sm_80 and has every kernel
// the launchers name. The kernels' numbers are tested by ctest nngpu_cuda_emu (on the CPU) and
// engine/bert's GPU parity test.
func TestPTX(t *testing.T) {
	cudatest.CheckPTX(t, ptxFiles, ptxPath, Entries...)
}

// TestLoad loads the kernels on a GPU (skips without one).
func TestLoad(t *testing.T) {
	cudatest.Open(t, Load)
}
