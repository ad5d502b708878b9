// Package idle runs background work at the lowest CPU priority, so that it takes only the
// cores that nothing else on the host wants: a weight receiver's spare copy, a sender's
// manifest hash, while other receivers on the same host (or the sender) finish a version.
package idle

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// Nice is the priority (nice value) of the thread Run uses.
const Nice = 19

// Run runs f on a thread of its own at nice Nice and returns f's error. The thread is never
// handed back to the Go scheduler: raising a thread's priority again needs privileges, so it
// ends with f's goroutine (runtime.LockOSThread without Unlock) instead. Goroutines f starts
// run on ordinary threads.
func Run(f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), Nice) // best effort: f runs either way
		done <- f()
	}()
	return <-done
}
