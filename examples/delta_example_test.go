// Package examples holds the scripts that show needle's C ABI from a trainer's process; its
// tests run them against libneedle.so.
package examples

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"needle/testkit/testenv"
)

// libneedle is build/native/libneedle.so (`make native`); missing, the test skips, or fails
// under NEEDLE_STRICT=1 as every resource does.
func libneedle(t *testing.T) string {
	t.Helper()
	lib, _ := filepath.Abs(filepath.Join("..", "build", "native", "libneedle.so"))
	if _, err := os.Stat(lib); err != nil {
		testenv.Missing(t, lib)
	}
	return lib
}

// TestDeltaExample runs delta_example.py: encode/apply through ctypes, compared bit for bit
// with NumPy on the same buffers (the script exits non-zero on any mismatch).
func TestDeltaExample(t *testing.T) {
	out, err := exec.Command(testenv.Python(t), "delta_example.py", libneedle(t)).CombinedOutput()
	if err != nil {
		t.Fatalf("delta_example.py: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
