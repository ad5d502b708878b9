package npy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"needle/testkit/testenv"
)

// NumPy reads the headers: shape and dtype as written.
func TestHeaderReadByNumPy(t *testing.T) {
	py := testenv.Python(t)
	dir := t.TempDir()
	f32 := append(Header("<f4", 2, 3), make([]byte, 4*6)...)
	i64 := append(Header("<i8", 5), make([]byte, 8*5)...)
	os.WriteFile(filepath.Join(dir, "a.npy"), f32, 0o644)
	os.WriteFile(filepath.Join(dir, "b.npy"), i64, 0o644)
	out, err := exec.Command(py, "-c", `import numpy as np, sys
a, b = np.load(sys.argv[1] + "/a.npy"), np.load(sys.argv[1] + "/b.npy")
print(a.shape, a.dtype, b.shape, b.dtype)`, dir).CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || got != "(2, 3) float32 (5,) int64" {
		t.Fatalf("numpy read %q, %v", out, err)
	}
}
