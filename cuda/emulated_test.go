package cuda_test

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"needle/cuda"
	"needle/testkit/cudatest"
)

// TestWithoutGPUEmulatedRefusals drives package cuda against the emulated driver (in a child
// process, with CUDAEMU_REFUSE=fatbin: the driver refuses fatbins as one without an image for
// its GPU does): a refused image's error carries the driver's JIT error log and the device stays
// healthy; LoadKernels then falls back to the PTX; an image that is neither is refused with its
// log; an unknown kernel is a driver error that marks the device unhealthy.
func TestWithoutGPUEmulatedRefusals(t *testing.T) {
	if os.Getenv("CUDAEMU_REFUSE") == "" {
		cudatest.RunEmulated(t, "TestWithoutGPUEmulatedRefusals", "CUDAEMU_REFUSE=fatbin")
		return
	}
	dev := cudatest.Device(t)
	fsys := fstest.MapFS{
		"ptx/k.fatbin":   {Data: []byte{0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		"ptx/k_sm80.ptx": {Data: []byte(".version 7.0\n.target sm_80\n")},
	}
	t.Setenv(cuda.ImageEnv, "fatbin")
	_, err := dev.LoadKernels(fsys, "k")
	if err == nil || !strings.Contains(err.Error(), `ptx/k.fatbin: cuda load module: no kernel image is available for execution on the device (CUDA error 209); JIT error log: "cudaemu: no image for this GPU in the fatbin (CUDAEMU_REFUSE=fatbin)"`) {
		t.Fatalf("refused fatbin: %v", err)
	}
	if dev.Err() != nil {
		t.Fatalf("a refused image made the device unhealthy: %v", dev.Err())
	}
	t.Setenv(cuda.ImageEnv, "")
	m, err := dev.LoadKernels(fsys, "k")
	if err != nil || m.Image != "ptx/k_sm80.ptx" {
		t.Fatalf("fallback to the PTX: %v, %+v", err, m)
	}
	if _, err := dev.LoadModule([]byte("not an image\x00")); err == nil || !strings.Contains(err.Error(), "neither a fatbin nor PTX") {
		t.Fatalf("garbage image: %v", err)
	}
	if _, err := m.Function("nl_no_such_kernel"); err == nil || !strings.Contains(err.Error(), "named symbol not found") || dev.Err() == nil {
		t.Fatalf("unknown kernel: %v (device error %v)", err, dev.Err())
	}
}
