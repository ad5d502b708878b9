// Package progress draws a progress bar for long jobs on stderr: rows done, rate and ETA,
// redrawn in place on a terminal, or as plain periodic lines when the output is a file or
// pipe (logs). A Bar is safe for concurrent Add calls.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Options configures a Bar.
type Options struct {
	Label string // what is counted, e.g. "passages"
	Total int64  // rows the job will reach; 0 = unknown (no ETA)
	// Done is what a resumed job had finished before this run: shown in the count, left
	// out of the rate so the ETA reflects this run's speed.
	Done int64
	// Interval between redraws; 0 = 250ms on a terminal, 10s otherwise.
	Interval time.Duration
}

// Bar reports progress until Finish. Add is lock-free; drawing happens on its own goroutine.
type Bar struct {
	w        io.Writer
	opt      Options
	terminal bool
	start    time.Time
	done     atomic.Int64 // rows finished in this run

	stop     chan struct{}
	stopOnce sync.Once
	drawn    sync.WaitGroup
	mu       sync.Mutex // serializes writes to w
}

// Start begins reporting to w (usually os.Stderr).
func Start(w io.Writer, opt Options) *Bar {
	b := &Bar{w: w, opt: opt, terminal: isTerminal(w), start: time.Now(), stop: make(chan struct{})}
	if b.opt.Interval <= 0 {
		b.opt.Interval = 10 * time.Second
		if b.terminal {
			b.opt.Interval = 250 * time.Millisecond
		}
	}
	b.drawn.Add(1)
	go b.loop()
	return b
}

// Add counts n more finished rows.
func (b *Bar) Add(n int64) { b.done.Add(n) }

// Set makes done the count of rows finished in this run, for callers that get a running
// total (a callback reporting bytes done so far).
func (b *Bar) Set(done int64) { b.done.Store(done) }

// Finish stops redrawing and prints the final state on its own line. Idempotent.
func (b *Bar) Finish() {
	b.stopOnce.Do(func() {
		close(b.stop)
		b.drawn.Wait()
		b.draw(true)
	})
}

func (b *Bar) loop() {
	defer b.drawn.Done()
	t := time.NewTicker(b.opt.Interval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			b.draw(false)
		}
	}
}

func (b *Bar) draw(final bool) {
	line := Line(b.opt, b.done.Load(), time.Since(b.start), b.terminal)
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.terminal && final:
		fmt.Fprintf(b.w, "\r%s\x1b[K\n", line)
	case b.terminal:
		fmt.Fprintf(b.w, "\r%s\x1b[K", line)
	default:
		fmt.Fprintln(b.w, line)
	}
}

// barWidth is the number of cells of the drawn bar on a terminal.
const barWidth = 30

// Line renders one progress line: done rows of this run (plus opt.Done), the rate of this
// run per second, and the ETA. withBar adds a drawn bar (terminal mode).
func Line(opt Options, done int64, elapsed time.Duration, withBar bool) string {
	all := opt.Done + done
	var sb strings.Builder
	if withBar && opt.Total > 0 {
		filled := int(min(all, opt.Total) * barWidth / opt.Total)
		sb.WriteString("[" + strings.Repeat("#", filled) + strings.Repeat(".", barWidth-filled) + "] ")
	}
	if opt.Total > 0 {
		fmt.Fprintf(&sb, "%d/%d %s (%.1f%%)", all, opt.Total, opt.Label, 100*float64(all)/float64(opt.Total))
	} else {
		fmt.Fprintf(&sb, "%d %s", all, opt.Label)
	}
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(done) / s
	}
	fmt.Fprintf(&sb, ", %.1f/s, elapsed %s", rate, Duration(elapsed))
	if opt.Total > 0 && all < opt.Total {
		if rate > 0 {
			eta := time.Duration(float64(opt.Total-all) / rate * float64(time.Second))
			fmt.Fprintf(&sb, ", ETA %s", Duration(eta))
		} else {
			sb.WriteString(", ETA ?")
		}
	}
	return sb.String()
}

// Duration renders d as h:mm:ss (or m:ss under an hour), rounded to the second.
func Duration(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	if s < 3600 {
		return fmt.Sprintf("%d:%02d", s/60, s%60)
	}
	return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
}

// isTerminal reports whether w is a terminal (then the bar redraws in place).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
