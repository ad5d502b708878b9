package idle

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRun: f runs on a thread at nice 19, its error comes back, and the calling thread keeps
// its own priority.
func TestRun(t *testing.T) {
	before, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := errors.New("f's error")
	var inside int
	err = Run(func() error {
		inside, _ = unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
		return want
	})
	if err != want {
		t.Fatalf("Run returned %v", err)
	}
	// The raw system call returns 20 - nice.
	if inside != 20-Nice {
		t.Fatalf("f ran at nice %d, want %d", 20-inside, Nice)
	}
	if after, _ := unix.Getpriority(unix.PRIO_PROCESS, 0); after != before {
		t.Fatalf("the process's priority changed from %d to %d", before, after)
	}
}
