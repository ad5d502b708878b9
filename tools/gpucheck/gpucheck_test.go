// Package gpucheck holds the GPU check's scripts (gpucheck.py, pack_libs.py, half_model.py);
// this test runs gpucheck.py's own tests (test_gpucheck.py: counting, failures, budget, library
// choice; no GPU needed) in `make test` with the project venv's pytest.
package gpucheck

import (
	"os/exec"
	"strings"
	"testing"

	"needle/testkit/testenv"
)

func TestGPUCheckScript(t *testing.T) {
	cmd := exec.Command(testenv.Python(t), "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_gpucheck.py")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), " passed") {
		t.Fatalf("pytest test_gpucheck.py: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
