package procstat

import (
	"testing"
	"time"
)

// TestCPU: the process's CPU time is positive and grows while a thread spins (a loaded
// machine slows the growth, so the loop waits for it, up to 10 s of wall time).
func TestCPU(t *testing.T) {
	before := CPU()
	if before <= 0 {
		t.Fatalf("CPU() = %v once the test binary runs, want > 0", before)
	}
	start := time.Now()
	for CPU()-before < 20*time.Millisecond {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("CPU grew by %v over 10 s of spinning, want >= 20 ms", CPU()-before)
		}
	}
}
