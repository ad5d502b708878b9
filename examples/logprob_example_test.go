package examples

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"needle/testkit/testenv"
)

// TestLogprobExample runs logprob_ctypes.py: needle_logprob_{bf16,f16,f32} and needle_linear_logprob_f32
// through ctypes on NumPy buffers, against NumPy's float64 reference on those same buffers. The
// test reads the script's JSON and checks the errors itself, not only its exit status.
func TestLogprobExample(t *testing.T) {
	out, err := exec.Command(testenv.Python(t), "logprob_ctypes.py", libneedle(t)).Output()
	if err != nil {
		t.Fatalf("logprob_ctypes.py: %v\n%s", err, out)
	}
	var res struct {
		Cases    map[string][]float64 `json:"cases"`
		BadLabel struct {
			Status int    `json:"status"`
			Error  string `json:"error"`
		} `json:"bad_label"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("script output is not JSON: %v\n%s", err, out)
	}
	if len(res.Cases) != 5 {
		t.Fatalf("want 5 cases, got %v", res.Cases)
	}
	for name, errs := range res.Cases {
		for k, e := range errs {
			if !(e <= 1e-5) {
				t.Errorf("%s: %s max relative error %g > 1e-5", name, []string{"logprob", "entropy", "lse"}[k], e)
			}
		}
	}
	if res.BadLabel.Status != -1 || !strings.Contains(res.BadLabel.Error, "labels[1] = 5 is outside [0, 5)") {
		t.Errorf("bad label: status %d, error %q", res.BadLabel.Status, res.BadLabel.Error)
	}
}
