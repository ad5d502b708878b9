// Package cudatest gives GPU tests and benchmarks their device: device 0, or a skip that says
// why when the machine has none (a machine without a GPU is a supported setup, so the test skips
// also under NEEDLE_STRICT=1; package cuda's own tests cover that path).
package cudatest

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"needle/cuda"
	"needle/internal/testenv"
)

// Device opens device 0 for the test's duration (closed by tb.Cleanup), skips tb when there is
// no CUDA device, and fails it on any other error.
func Device(tb testing.TB) *cuda.Device {
	dev, err := cuda.Open(0)
	if err != nil {
		if !errors.Is(err, cuda.ErrNoDevice) {
			tb.Fatalf("cuda.Open: %v, want ErrNoDevice", err)
		}
		tb.Skipf("runs only on a CUDA device; %v", err)
	}
	tb.Cleanup(func() { dev.Close() })
	return dev
}

// Open loads a kernel package's GPU half on Device(tb) with load (its NewGPU) and closes it when
// the test ends; it skips or fails tb as Device does.
func Open[T interface{ Close() error }](tb testing.TB, load func(*cuda.Device) (T, error)) T {
	g, err := load(Device(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	return g
}

// CheckPTX fails t unless the PTX file path of fsys (a kernel package's embedded ptx/ folder)
// targets sm_80 and has every entry; a PTX not built is testenv.Missing (a failure under
// NEEDLE_STRICT=1, after make native).
func CheckPTX(t *testing.T, fsys fs.FS, path string, entries ...string) {
	ptx, err := cuda.ReadPTX(fsys, path)
	if err != nil {
		testenv.Missing(t, fmt.Sprintf("the embedded PTX (%v)", err))
	}
	if !strings.Contains(string(ptx), ".target sm_80") {
		t.Errorf("%s does not target sm_80", path)
	}
	for _, name := range entries {
		if !strings.Contains(string(ptx), ".entry "+name+"(") {
			t.Errorf("%s has no entry %s", path, name)
		}
	}
}
