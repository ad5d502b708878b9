package bench

import (
	"encoding/json"
	"strings"
	"testing"

	"needle/testkit/testenv"
)

// TestWeightsTiny runs the weights benchmark on a small model, with the NumPy baseline: every
// receiver gets the first version in full and the new one, the re-serving tree sends the step
// once, apply rebuilds the version (checked inside), and NumPy agrees on AstraFlow's byte count.
func TestWeightsTiny(t *testing.T) {
	var b strings.Builder
	o := WeightsOptions{Shape: "tiny", Changed: 0.01, Receivers: 3, Tree: true, Dir: t.TempDir(), Threads: 2,
		Python: testenv.Python(t), Script: "weights_astraflow.py", MembwMiB: 8}
	if err := Weights(&b, o); err != nil {
		t.Fatal(err)
	}
	var rep weightsReport
	if err := json.Unmarshal([]byte(b.String()), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.ReadySeconds) != 3 || len(rep.FullReadySeconds) != 3 || rep.PublishCopySeconds <= 0 || rep.PublishOverwriteSeconds <= 0 ||
		rep.UplinkCopies != 1 || rep.NumPy == nil || rep.WireBytes == 0 {
		t.Fatalf("report %s", b.String())
	}
	if rep.ChangedFrac < 0.008 || rep.ChangedFrac > 0.012 {
		t.Errorf("changed fraction %v, want about 0.01", rep.ChangedFrac)
	}
}
