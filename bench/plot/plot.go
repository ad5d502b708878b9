// Package plot draws what one `needle bench` run measured into an SVG or PNG file with
// gonum.org/v1/plot: latency histograms with their percentiles, queries per second over the
// run, and side-by-side bars (baseline vs needle, or a figure vs the machine's limit). It is
// the one seam every bench target plots through: a target fills a Figure from its own
// measurements and calls Write with its --plot path (docs/bench.md).
package plot

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"needle/internal/option"
)

// Figure is one run's measurements; each part present is one panel, top to bottom in this
// order. A Figure with no part is an error (nothing was measured).
type Figure struct {
	Title     string
	Latencies []Latencies // one histogram panel each
	Finished  []Finish    // the queries/s panel
	Bars      *Bars       // the side-by-side panel
}

// Latencies are the durations of one kind of operation, e.g. "request" or "single query".
type Latencies struct {
	Of string
	D  []time.Duration
}

// Finish is one piece of work done: when it finished, since the run began, and how many
// queries it answered.
type Finish struct {
	At      time.Duration
	Queries int
}

// Bars are figures of one unit drawn side by side.
type Bars struct {
	Title, Unit string
	Bars        []Bar
}

// Bar is one labeled figure.
type Bar struct {
	Label string
	Value float64
}

// panelWidth and panelHeight are the size of one panel.
// Percentile is the nearest-rank p-quantile (0..1) of sorted, 0 for none: the one definition
// the bench targets print and plot.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

// errNotBuilt is Check's and Write's answer in the noplot build (noplot.go).
var errNotBuilt = option.Errorf("Plot", "this needle was built without plots (-tags noplot, the GPU check's build)")

// Check says, before a run, whether Write could write path: its extension and its folder.
// Targets call it first, so a typo does not cost a long run.
func Check(path string) error {
	if !drawn {
		return errNotBuilt
	}
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".svg" && ext != ".png" {
		return option.Errorf("Plot", "%s, want a .svg or .png file", path)
	}
	if _, err := os.Stat(filepath.Dir(path)); err != nil {
		return option.Wrap("Plot", err)
	}
	return nil
}
