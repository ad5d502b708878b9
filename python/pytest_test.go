// Package python holds needle_trainer, the Python package over libneedle.so; this test runs its
// pytest suite (python/tests) in `make test` with the project venv and the library `make native`
// built. The torch tests skip there (the venv has no torch) and run by hand where torch imports.
package python

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"needle/platform/cpu"
	"needle/testkit/testenv"
)

// TestPytest runs the suite once per SIMD level this CPU has (NEEDLE_SIMD), so every kernel
// variant libneedle.so dispatches to is checked against the float64 references.
func TestPytest(t *testing.T) {
	lib, _ := filepath.Abs(filepath.Join("..", "build", "native", "libneedle.so"))
	if _, err := os.Stat(lib); err != nil {
		testenv.Missing(t, lib)
	}
	py := testenv.Python(t)
	for _, l := range cpu.LevelsUpTo(cpu.AVX512) {
		cmd := exec.Command(py, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests")
		cmd.Env = append(os.Environ(), "NEEDLE_LIB="+lib, "PYTHONPATH=.", "NEEDLE_SIMD="+l.String())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pytest at NEEDLE_SIMD=%s: %v\n%s", l, err, out)
		}
		if !strings.Contains(string(out), " passed") {
			t.Fatalf("pytest at NEEDLE_SIMD=%s ran no tests:\n%s", l, out)
		}
		t.Logf("NEEDLE_SIMD=%s:\n%s", l, out)
	}
}
