//go:build !noplot

package plot

import (
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
	"needle/internal/option"
)

// drawn: this build draws (gonum/plot and its fonts are linked in; see noplot.go).
const drawn = true

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
		return option.Errorf("Plot", "the run measured nothing to plot")
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
		return option.Errorf("Plot", "%s, want a .svg or .png file", path)
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
		return option.Wrap("Plot", err)
	}
	return nil
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }
