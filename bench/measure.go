// Package bench holds the Go benchmarks behind `needle bench <name>`, one file each (kernels,
// delta cases of kernels, encode, retrieve, docstore, recall); the Python baselines they are
// compared with sit beside them in this folder. Each entry takes a plain options struct whose
// fields are the subcommand's flags (errors name the flags) and writes its report to an
// io.Writer; cmd/needle only parses the flags.
package bench

import (
	"fmt"
	"time"

	"needle/internal/option"
	"needle/internal/procstat"
)

// span is the wall-clock and CPU time (all threads, user + system) of one measured call.
// CPU time is what to compare when other processes share the cores.
type span struct{ wall, cpu time.Duration }

func (s span) best(o span) span {
	if s.wall == 0 || o.wall < s.wall {
		s.wall = o.wall
	}
	if s.cpu == 0 || o.cpu < s.cpu {
		s.cpu = o.cpu
	}
	return s
}

func measure(f func() error) (span, error) {
	cpu0, t := procstat.CPU(), time.Now()
	err := f()
	return span{wall: time.Since(t), cpu: procstat.CPU() - cpu0}, err
}

// readRSS returns this process's resident set from /proc/self/status: total, anonymous
// (heap, stacks) and file-backed (mapped corpus/sidecar pages, reclaimable page cache).
func readRSS() string {
	return fmt.Sprintf("%d kB (anon %d, file %d)", procstat.KB("VmRSS"), procstat.KB("RssAnon"), procstat.KB("RssFile"))
}

// plotSpec declares the --plot option of the targets that draw what they measured.
func plotSpec(p *string) option.Spec {
	return option.String(p, "Plot", "plot", "", "also draw what the run measured into this .svg or .png file: latency histograms with p50/p90/p99, queries/s over the run, side-by-side bars (docs/bench.md)")
}
