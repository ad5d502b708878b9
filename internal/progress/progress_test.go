package progress

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLine(t *testing.T) {
	cases := []struct {
		opt     Options
		done    int64
		elapsed time.Duration
		bar     bool
		want    string
	}{
		{Options{Label: "passages", Total: 1000}, 250, 10 * time.Second, false,
			"250/1000 passages (25.0%), 25.0/s, elapsed 0:10, ETA 0:30"},
		// A resumed job: 500 done before, 100 in 10 s now -> rate 10/s, 400 left -> 40 s.
		{Options{Label: "passages", Total: 1000, Done: 500}, 100, 10 * time.Second, false,
			"600/1000 passages (60.0%), 10.0/s, elapsed 0:10, ETA 0:40"},
		{Options{Label: "rows"}, 7, 2 * time.Second, false, "7 rows, 3.5/s, elapsed 0:02"},
		{Options{Label: "rows", Total: 10}, 0, 0, false, "0/10 rows (0.0%), 0.0/s, elapsed 0:00, ETA ?"},
		{Options{Label: "rows", Total: 10}, 10, time.Hour + 61*time.Second, true,
			"[" + strings.Repeat("#", 30) + "] 10/10 rows (100.0%), 0.0/s, elapsed 1:01:01"},
		{Options{Label: "rows", Total: 4}, 1, time.Second, true,
			"[#######" + strings.Repeat(".", 23) + "] 1/4 rows (25.0%), 1.0/s, elapsed 0:01, ETA 0:03"},
	}
	for _, c := range cases {
		if got := Line(c.opt, c.done, c.elapsed, c.bar); got != c.want {
			t.Errorf("Line(%+v, %d, %v, %v)\n got %q\nwant %q", c.opt, c.done, c.elapsed, c.bar, got, c.want)
		}
	}
}

// syncBuffer lets the drawing goroutine and the test share a buffer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A non-terminal writer gets plain lines (no carriage returns), the last one the final count.
func TestPlainLinesAndFinish(t *testing.T) {
	var out syncBuffer
	b := Start(&out, Options{Label: "rows", Total: 100, Interval: time.Millisecond})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				b.Add(1)
			}
		}()
	}
	wg.Wait()
	b.Finish()
	b.Finish() // idempotent
	s := out.String()
	if strings.ContainsAny(s, "\r\x1b") {
		t.Fatalf("plain output has terminal control characters: %q", s)
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "100/100 rows (100.0%)") {
		t.Fatalf("last line %q, want the final count", last)
	}
}
