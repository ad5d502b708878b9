package writer

import (
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
)

// TestLocked: writes from many goroutines arrive whole (none interleaved inside another).
func TestLocked(t *testing.T) {
	var b strings.Builder
	l := &Locked{W: &b}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				l.Write([]byte("0123456789\n"))
			}
		}()
	}
	wg.Wait()
	l.Lock()
	defer l.Unlock()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 1600 {
		t.Fatalf("%d lines, want 1600", len(lines))
	}
	for _, line := range lines {
		if line != "0123456789" {
			t.Fatalf("a torn write: %q", line)
		}
	}
}

// failAfter takes n bytes, then fails.
type failAfter struct{ n int }

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k := f.n
		f.n = 0
		return k, errors.New("full")
	}
	f.n -= len(p)
	return len(p), nil
}

// TestCounting: N counts what the writer took, the first error sticks and later writes fail
// without reaching the writer.
func TestCounting(t *testing.T) {
	c := &Counting{W: &failAfter{n: 10}}
	if n, err := c.Write(make([]byte, 6)); n != 6 || err != nil {
		t.Fatalf("first write: %d, %v", n, err)
	}
	if n, err := c.Write(make([]byte, 6)); n != 4 || err == nil {
		t.Fatalf("second write: %d, %v", n, err)
	}
	if n, err := c.Write(make([]byte, 1)); n != 0 || err == nil || err.Error() != "full" {
		t.Fatalf("after the error: %d, %v", n, err)
	}
	if c.N != 10 || c.Err == nil {
		t.Fatalf("N %d, Err %v", c.N, c.Err)
	}
}

func TestOrDiscard(t *testing.T) {
	var b strings.Builder
	if OrDiscard(&b) != &b || OrDiscard(nil) != io.Discard {
		t.Error("OrDiscard: not w itself, or not io.Discard for nil")
	}
}
