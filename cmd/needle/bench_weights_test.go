package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
)

// TestBenchWeightsReceiverProcesses: `needle bench weights` with its receivers as `needle
// weights recv` processes; both tell the benchmark of both versions, and the apply it measures
// rebuilds version 2 (checked inside).
func TestBenchWeightsReceiverProcesses(t *testing.T) {
	out, err := captureStdout(t, func() error {
		if rc := runMain([]string{"bench", "weights", "--shape", "tiny", "--receivers", "2", "--dir", t.TempDir(),
			"--membw-mib", "8", "--needle", filepath.Join(toolsDir, "needle")}); rc != 0 {
			return fmt.Errorf("exit status %d", rc)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Ready   []float64 `json:"ready_seconds"`
		PeakRSS int64     `json:"peak_rss_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Ready) != 2 || rep.PeakRSS <= 0 {
		t.Fatalf("report %s (%v)", out, err)
	}
}
