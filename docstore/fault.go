package docstore

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"
)

// ErrChanged is wrapped by the error of a read that faulted on a mapping: its file was
// truncated (or rewritten) in place while open. The store stays unusable; reopen it once
// the file is complete.
var ErrChanged = errors.New("the file changed under the server")

// CatchFault runs read, which reads mapped memory on this goroutine, and turns a fault
// there (SIGBUS: the mapped file shrank) into an error wrapping ErrChanged instead of a
// crash. Other panics pass through.
func CatchFault(read func()) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			fault, ok := r.(interface{ Addr() uintptr }) // what SetPanicOnFault panics with
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%w: fault reading mapped memory at %#x", ErrChanged, fault.Addr())
		}
	}()
	read()
	return nil
}

// read runs fn as CatchFault does; after a first fault every read fails at once, with
// an error saying how the file differs from when it was opened.
func (l *lineFile) read(fn func()) error {
	if e := l.changed.Load(); e != nil {
		return *e
	}
	if CatchFault(fn) == nil {
		return nil
	}
	now := "now cannot be read"
	if st, err := os.Stat(l.path); err == nil {
		now = fmt.Sprintf("now %d bytes, modified %s", st.Size(), st.ModTime().UTC().Format(time.RFC3339Nano))
	}
	err := fmt.Errorf("%w: %s was %d bytes, modified %s, when opened, %s (replace files by rename, never in place)",
		ErrChanged, l.path, l.fp.size, time.Unix(0, l.fp.mtime).UTC().Format(time.RFC3339Nano), now)
	l.changed.CompareAndSwap(nil, &err)
	return *l.changed.Load()
}
