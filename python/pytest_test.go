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

// TestPytest runs the whole suite at the best SIMD level libneedle.so dispatches to here, and its
// CPU kernel tests (test_logprob.py, test_delta.py) once more at each level below (NEEDLE_SIMD),
// so every kernel variant is checked against the float64 references; the CUDA and torch tests do
// not depend on the level.
func TestPytest(t *testing.T) {
	lib, _ := filepath.Abs(filepath.Join("..", "build", "native", "libneedle.so"))
	if _, err := os.Stat(lib); err != nil {
		testenv.Missing(t, lib)
	}
	py := testenv.Python(t)
	levels := cpu.LevelsUpTo(cpu.AVX512)
	for i, l := range levels {
		files := []string{"tests/test_logprob.py", "tests/test_delta.py"}
		if i == len(levels)-1 {
			files = []string{"tests"}
		}
		cmd := exec.Command(py, append([]string{"-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"}, files...)...)
		cmd.Env = append(os.Environ(), "NEEDLE_LIB="+lib, "PYTHONPATH=.", "NEEDLE_SIMD="+l.String())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pytest %v at NEEDLE_SIMD=%s: %v\n%s", files, l, err, out)
		}
		if !strings.Contains(string(out), " passed") {
			t.Fatalf("pytest %v at NEEDLE_SIMD=%s ran no tests:\n%s", files, l, out)
		}
		t.Logf("pytest %v at NEEDLE_SIMD=%s:\n%s", files, l, out)
	}
}
