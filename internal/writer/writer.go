// Package writer holds the io.Writer wrappers several packages need: Locked (one log written
// by several goroutines), Counting (the bytes a writer took, and its first error) and
// OrDiscard (the rule of every package's log and progress writers: nil discards).
package writer

import (
	"io"
	"sync"
)

// OrDiscard is w, or io.Discard when w is nil: a nil log or progress writer in any Options
// means silence (a command passes os.Stderr for what its user should see).
func OrDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// Locked serializes writes to W. Its mutex is exported so that whoever reads what W collects
// (a test's strings.Builder) can hold it and see whole writes only.
type Locked struct {
	sync.Mutex
	W io.Writer
}

func (l *Locked) Write(p []byte) (int, error) {
	l.Lock()
	defer l.Unlock()
	return l.W.Write(p)
}

// Counting passes writes on to W, counts the bytes W took (N) and keeps W's first error (Err):
// after it every write fails with that error, so a caller can write a sequence and check once.
type Counting struct {
	W   io.Writer
	N   int64
	Err error
}

func (c *Counting) Write(p []byte) (int, error) {
	if c.Err != nil {
		return 0, c.Err
	}
	n, err := c.W.Write(p)
	c.N += int64(n)
	c.Err = err
	return n, err
}
