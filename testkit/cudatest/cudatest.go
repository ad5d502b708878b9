// Package cudatest gives GPU tests and benchmarks their device: device 0, or a skip that says
// why when the machine has none. A machine without a GPU is a supported setup, so the test
// skips also under NEEDLE_STRICT=1 (package cuda's own tests cover that path); on the GPU
// machine the GPU check sets NEEDLE_REQUIRE_GPU=1, and a missing device or cuBLAS fails the
// test instead: a check that skipped everything must not look like one that passed.
package cudatest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"needle/cuda"
	"needle/testkit/testenv"
)

// RequireEnv names the environment variable under which a missing device or cuBLAS fails a
// GPU test instead of skipping it (tools/gpucheck/gpucheck.py sets it).
const RequireEnv = "NEEDLE_REQUIRE_GPU"

// unavailable skips tb, which runs only with need (a device, cuBLAS), because of err, or fails
// it under RequireEnv.
func unavailable(tb testing.TB, need string, err error) {
	tb.Helper()
	if os.Getenv(RequireEnv) == "1" {
		tb.Fatalf("%s=1, and this test runs only %s: %v", RequireEnv, need, err)
	}
	tb.Skipf("runs only %s; %v", need, err)
}

// Device opens device 0 for the test's duration (closed by tb.Cleanup), skips tb when there is
// no CUDA device (fails it under NEEDLE_REQUIRE_GPU=1), and fails it on any other error.
func Device(tb testing.TB) *cuda.Device {
	tb.Helper()
	dev, err := cuda.Open(0)
	if err != nil {
		if !errors.Is(err, cuda.ErrNoDevice) {
			tb.Fatalf("cuda.Open: %v, want ErrNoDevice", err)
		}
		unavailable(tb, "on a CUDA device", err)
	}
	tb.Cleanup(func() { dev.Close() })
	return dev
}

// DeviceWithBLAS is Device for tests that also need cuBLAS: without it they skip, or fail
// under NEEDLE_REQUIRE_GPU=1, with the places cuBLAS was looked for.
func DeviceWithBLAS(tb testing.TB) *cuda.Device {
	tb.Helper()
	dev := Device(tb)
	if _, err := cuda.CublasPath(); err != nil {
		unavailable(tb, "with cuBLAS", err)
	}
	return dev
}

// WithoutDevice skips tb where a CUDA device opens: for the tests of the fallbacks of a
// machine without one. The GPU check leaves them out (-test.skip WithoutGPU: name them so).
func WithoutDevice(tb testing.TB) {
	tb.Helper()
	if dev, err := cuda.Open(0); err == nil {
		dev.Close()
		tb.Skip("a GPU is present; this test covers machines without one")
	}
}

// Open loads a kernel package's GPU half on Device(tb) with load (its NewGPU) and closes it when
// the test ends; it skips or fails tb as Device does.
func Open[T interface{ Close() error }](tb testing.TB, load func(*cuda.Device) (T, error)) T {
	tb.Helper()
	g, err := load(Device(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	return g
}

// CheckKernels fails t unless the kernel images of stem in fsys (a kernel package's embedded
// ptx/ folder) are complete: the clang PTX targets sm_80 and has every entry, and the nvcc
// fatbin holds sm_80 and sm_90 machine code and PTX, its machine code naming every entry.
// An image not built is testenv.Missing (a failure under NEEDLE_STRICT=1, after make setup
// and make native).
func CheckKernels(t *testing.T, fsys fs.FS, stem string, entries ...string) {
	t.Helper()
	ptx, err := cuda.ReadPTX(fsys, cuda.PTXPath(stem))
	if err != nil {
		testenv.Missing(t, fmt.Sprintf("the embedded PTX (%v)", err))
	}
	if !bytes.Contains(ptx, []byte(".target sm_80")) {
		t.Errorf("%s does not target sm_80", cuda.PTXPath(stem))
	}
	for _, name := range entries {
		if !bytes.Contains(ptx, []byte(".entry "+name+"(")) {
			t.Errorf("%s has no entry %s", cuda.PTXPath(stem), name)
		}
	}
	fat, err := fs.ReadFile(fsys, cuda.FatbinPath(stem))
	if err != nil {
		testenv.Missing(t, fmt.Sprintf("the embedded fatbin %s (nvcc from `make setup`, then `make native`)", cuda.FatbinPath(stem)))
	}
	images, err := cuda.FatbinEntries(fat)
	if err != nil {
		t.Fatalf("%s: %v", cuda.FatbinPath(stem), err)
	}
	for _, want := range []cuda.FatbinEntry{{PTX: false, Arch: 80}, {PTX: false, Arch: 90}, {PTX: true, Arch: 80}} {
		if !slices.Contains(images, want) {
			t.Errorf("%s holds %v, not %v", cuda.FatbinPath(stem), images, want)
		}
	}
	for _, name := range entries { // the cubins' section names (.nv.info.<kernel>) are plain text
		if !bytes.Contains(fat, []byte(".nv.info."+name+"\x00")) {
			t.Errorf("%s has no kernel %s", cuda.FatbinPath(stem), name)
		}
	}
	t.Logf("%s: %s", cuda.FatbinPath(stem), strings.Trim(fmt.Sprint(images), "[]"))
}

// EmulatedDriver is the path of libcudaemu_driver.so (`make native`: the CUDA driver API emulated on
// the CPU over the trainer kernels, testkit/cudaemu/driver.cpp); not built is
// testenv.Missing.
func EmulatedDriver(t *testing.T) string {
	t.Helper()
	dir, _ := os.Getwd()
	for ; dir != filepath.Dir(dir); dir = filepath.Dir(dir) { // up to the module's root
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
	}
	lib := filepath.Join(dir, "build", "native", "testkit", "cudaemu", "libcudaemu_driver.so")
	if _, err := os.Stat(lib); err != nil {
		testenv.Missing(t, "the emulated CUDA driver "+lib)
	}
	return lib
}

// RunEmulated runs test (a test of the calling package) in a child process whose CUDA driver and
// cuBLAS are the emulated ones (NEEDLE_CUDA_LIB, NEEDLE_CUBLAS; NEEDLE_REQUIRE_GPU=1, so a skip
// fails), with env added, and
// returns its output; t fails unless the child passed. The driver is loaded once per process,
// hence the child; it runs with -test.short, for tests to keep their emulated launches few.
// For the tests named *WithoutGPU* (the GPU check leaves them out).
func RunEmulated(t *testing.T, test string, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^"+test+"$", "-test.v", "-test.short")
	lib := EmulatedDriver(t)
	cmd.Env = append(os.Environ(), append([]string{cuda.LibraryEnv + "=" + lib, cuda.CublasEnv + "=" + lib, RequireEnv + "=1"}, env...)...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("%s against the emulated driver (%v): %v\n%s", test, env, err, out)
	}
	return string(out)
}
