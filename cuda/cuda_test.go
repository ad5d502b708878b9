package cuda

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestOpenWithoutGPU runs where no NVIDIA driver is installed (it skips where one is, and the
// GPU check leaves it out): Open must fail cleanly with ErrNoDevice and a reason, every time,
// without touching the process.
func TestOpenWithoutGPU(t *testing.T) {
	if _, err := os.Stat("/proc/driver/nvidia"); err == nil {
		t.Skip("an NVIDIA driver is present; this test covers machines without one")
	}
	for i := 0; i < 2; i++ {
		dev, err := Open(0)
		if err == nil {
			dev.Close()
			t.Fatal("Open(0) succeeded on a machine without an NVIDIA driver")
		}
		if !errors.Is(err, ErrNoDevice) {
			t.Fatalf("Open(0) error %v does not wrap ErrNoDevice", err)
		}
		if !strings.Contains(err.Error(), "CUDA driver") && !strings.Contains(err.Error(), "cuInit") {
			t.Fatalf("Open(0) error %q does not say why", err)
		}
	}
}

// TestLibraryWithoutDriverAPI loads a real library that is not a CUDA driver (libm) through
// NEEDLE_CUDA_LIB in a child process (the driver is loaded once per process): the symbol lookup
// must fail with ErrNoDevice naming the missing function.
func TestLibraryWithoutDriverAPI(t *testing.T) {
	if os.Getenv("NEEDLE_CUDA_TEST_CHILD") == "1" {
		_, err := Open(0)
		if !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), "libm.so.6 has no cuInit") {
			t.Fatalf("Open with libm as the driver: %v", err)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLibraryWithoutDriverAPI$", "-test.v")
	cmd.Env = append(os.Environ(), "NEEDLE_CUDA_TEST_CHILD=1", LibraryEnv+"=libm.so.6")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// TestParamValues pins the kernel parameter layout Launch hands to the host core.
func TestParamValues(t *testing.T) {
	got := make([]uint64, 5)
	if err := paramValues(got, []any{&Buffer{ptr: 0xdead0000}, int64(-2), int32(-1), uint64(7), float32(1.5)}); err != nil {
		t.Fatal(err)
	}
	want := []uint64{0xdead0000, 0xfffffffffffffffe, 0xffffffff, 7, 0x3fc00000}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("param %d = %#x, want %#x", i, got[i], want[i])
		}
	}
	if err := paramValues(got, []any{1.5}); err == nil || !strings.Contains(err.Error(), "argument 0 has unsupported type float64") {
		t.Errorf("float64 argument: %v", err)
	}
	if err := paramValues(got[:1], []any{int64(1), int64(2)}); err == nil || !strings.Contains(err.Error(), "2 arguments, at most 1") {
		t.Errorf("too many arguments: %v", err)
	}
}

// TestLoadKernelsArguments: what LoadKernels refuses before any driver call (the
// loads themselves run against the emulated driver in emulated_test.go, and on the GPU machine,
// where the check runs every kernel test once with NEEDLE_CUDA_IMAGE=fatbin and once with =ptx).
func TestLoadKernelsArguments(t *testing.T) {
	t.Setenv(ImageEnv, "cubin")
	if _, err := (&Device{}).LoadKernels(nil, "logprob"); err == nil || !strings.Contains(err.Error(), `NEEDLE_CUDA_IMAGE="cubin": want fatbin or ptx`) {
		t.Errorf("%s=cubin: %v", ImageEnv, err)
	}
}
