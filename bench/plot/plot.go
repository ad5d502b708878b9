// Package plot draws what one `needle bench` run measured into an SVG or PNG file with
// gonum.org/v1/plot: latency histograms with their percentiles, queries per second over the
// run, and side-by-side bars (baseline vs needle, or a figure vs the machine's limit). It is
// the one seam every bench target plots through: a target fills a Figure from its own
// measurements and calls Write with its --plot path (docs/bench.md).
package plot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"needle/internal/atomicfile"
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
const panelWidth, panelHeight = 7 * vg.Inch, 2.6 * vg.Inch

// Write draws f into path, an .svg or .png file by its extension, atomically.
func Write(path string, f Figure) error {
	var panels []*plot.Plot
	for _, l := range f.Latencies {
		p, err := histogram(l)
		if err != nil {
			return err
		}
		panels = append(panels, p)
	}
	if len(f.Finished) > 0 {
		p, err := rate(f.Finished)
		if err != nil {
			return err
		}
		panels = append(panels, p)
	}
	if f.Bars != nil && len(f.Bars.Bars) > 0 {
		p, err := bars(*f.Bars)
		if err != nil {
			return err
		}
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return errors.New("--plot: the run measured nothing to plot")
	}
	panels[0].Title.Text = strings.TrimSpace(f.Title + "\n" + panels[0].Title.Text)
	w, h := panelWidth, panelHeight*vg.Length(len(panels))
	var c vg.CanvasWriterTo
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".svg":
		c = vgsvg.New(w, h)
	case ".png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(144))}
	default:
		return fmt.Errorf("--plot %s: want a .svg or .png file", path)
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Millimeter, PadY: 3 * vg.Millimeter, PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	grid := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		grid[i] = []*plot.Plot{p}
	}
	cells := plot.Align(grid, tiles, draw.New(c))
	for i, p := range panels {
		p.Draw(cells[i][0])
	}
	if err := atomicfile.Create(path, func(f *os.File) error { _, err := c.WriteTo(f); return err }); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	return nil
}

// Percentile is the nearest-rank p-quantile (0..1) of sorted, 0 for none: the one definition
// the bench targets print and plot.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }

// Check says, before a run, whether Write could write path: its extension and its folder.
// Targets call it first, so a typo does not cost a long run.
func Check(path string) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".svg" && ext != ".png" {
		return fmt.Errorf("--plot %s: want a .svg or .png file", path)
	}
	if _, err := os.Stat(filepath.Dir(path)); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	return nil
}
