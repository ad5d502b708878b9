package procstat

import (
	"testing"
	"time"
)

// TestCPU: the process's CPU time grows by about the time a busy loop ran on one thread.
func TestCPU(t *testing.T) {
	before := CPU()
	if before <= 0 {
		t.Fatalf("CPU() = %v before any work, want > 0 (a test binary has started)", before)
	}
	start, spins := time.Now(), 0
	for time.Since(start) < 50*time.Millisecond {
		spins++
	}
	if got := CPU() - before; got < 10*time.Millisecond {
		t.Errorf("CPU grew by %v over a 50 ms busy loop (%d spins), want >= 10 ms", got, spins)
	}
}
