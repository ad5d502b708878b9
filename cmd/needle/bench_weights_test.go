package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestBenchWeightsReceiverProcesses: `needle bench weights` with its receivers as `needle
// weights recv` processes; both tell the benchmark of both versions, and the apply it measures
// rebuilds version 2 (checked inside).
func TestBenchWeightsReceiverProcesses(t *testing.T) {
	out := filepath.Join(t.TempDir(), "report.json")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = f
	rc := runMain([]string{"bench", "weights", "--shape", "tiny", "--receivers", "2", "--dir", t.TempDir(),
		"--membw-mib", "8", "--needle", filepath.Join(toolsDir, "needle")})
	os.Stdout = stdout
	f.Close()
	if rc != 0 {
		t.Fatalf("exit status %d", rc)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Ready   []float64 `json:"ready_seconds"`
		PeakRSS int64     `json:"peak_rss_bytes"`
	}
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Ready) != 2 || rep.PeakRSS <= 0 {
		t.Fatalf("report %s (%v)", b, err)
	}
}
