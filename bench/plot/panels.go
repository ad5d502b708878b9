//go:build !noplot

package plot

import (
	"fmt"
	"image/color"
	"slices"
	"time"

	"needle/internal/option"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// percentiles are the quantiles a latency panel marks, with their line colors.
var percentiles = []struct {
	p     float64
	name  string
	color color.RGBA
}{
	{.50, "p50", color.RGBA{R: 0x06, G: 0x76, B: 0x47, A: 0xff}},
	{.90, "p90", color.RGBA{R: 0xd9, G: 0x7b, B: 0x06, A: 0xff}},
	{.99, "p99", color.RGBA{R: 0xb4, G: 0x23, B: 0x18, A: 0xff}},
}

var barColor = color.RGBA{R: 0x29, G: 0x52, B: 0xcc, A: 0xff}

// histogram is the latency panel of l: counts per millisecond bin, a vertical line at each
// percentile.
func histogram(l Latencies) (*plot.Plot, error) {
	if len(l.D) == 0 {
		return nil, option.Errorf("Plot", "no %s latencies were measured", l.Of)
	}
	sorted := slices.Sorted(slices.Values(l.D))
	values := make(plotter.Values, len(sorted))
	for i, d := range sorted {
		values[i] = ms(d)
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s latency, %d measured", l.Of, len(sorted))
	p.X.Label.Text, p.Y.Label.Text = "ms", "count"
	bins := min(40, max(5, len(sorted)/5))
	h, err := plotter.NewHist(values, bins)
	if err != nil {
		return nil, err
	}
	h.FillColor, h.LineStyle.Width = barColor, 0
	p.Add(h)
	top := 0.0
	for _, b := range h.Bins {
		top = max(top, b.Weight)
	}
	for _, q := range percentiles {
		x := ms(Percentile(sorted, q.p))
		line, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top * 1.05}})
		if err != nil {
			return nil, err
		}
		line.Color, line.Width = q.color, vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s %.1f ms", q.name, x), line)
	}
	// Room on the right for the legend, clear of the slowest bars.
	p.X.Max = values[len(values)-1] + 0.3*(values[len(values)-1]-values[0]) + 1e-3
	p.Legend.Top = true
	return p, nil
}

// rate is the queries/s panel: queries finished per bin over the run, about 40 bins of at
// least 100 ms.
func rate(done []Finish) (*plot.Plot, error) {
	end := time.Duration(0)
	total := 0
	for _, f := range done {
		end, total = max(end, f.At), total+f.Queries
	}
	bin := max(100*time.Millisecond, end/40)
	n := int(end/bin) + 1
	counts := make([]float64, n)
	for _, f := range done {
		counts[int(f.At/bin)] += float64(f.Queries)
	}
	xys := make(plotter.XYs, n)
	for i, c := range counts {
		xys[i] = plotter.XY{X: (time.Duration(i) * bin).Seconds(), Y: c / bin.Seconds()}
	}
	if n > 1 { // the last bin is cut short by the run's end: leave it out rather than draw a false drop
		xys = xys[:n-1]
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("queries/s over the run (%.1f s bins; mean %.1f)", bin.Seconds(), float64(total)/max(end, bin).Seconds())
	p.X.Label.Text, p.Y.Label.Text = "s since start", "queries/s"
	p.Y.Min = 0
	line, err := plotter.NewLine(xys)
	if err != nil {
		return nil, err
	}
	line.Color, line.Width = barColor, vg.Points(1.5)
	p.Add(line)
	return p, nil
}

// bars is the side-by-side panel.
func bars(b Bars) (*plot.Plot, error) {
	values := make(plotter.Values, len(b.Bars))
	names := make([]string, len(b.Bars))
	for i, x := range b.Bars {
		values[i], names[i] = x.Value, x.Label
	}
	p := plot.New()
	p.Title.Text = b.Title
	p.Y.Label.Text = b.Unit
	chart, err := plotter.NewBarChart(values, vg.Points(40))
	if err != nil {
		return nil, err
	}
	chart.Color, chart.LineStyle.Width = barColor, 0
	p.Add(chart)
	p.NominalX(names...)
	labels, err := plotter.NewLabels(plotter.XYLabels{XYs: barTops(values), Labels: formatAll(values)})
	if err != nil {
		return nil, err
	}
	p.Add(labels)
	p.Y.Max = slices.Max(values) * 1.15
	return p, nil
}

// barTops are the points just above each bar, where its figure is written.
func barTops(values plotter.Values) plotter.XYs {
	xys := make(plotter.XYs, len(values))
	for i, v := range values {
		xys[i] = plotter.XY{X: float64(i) - 0.12, Y: v * 1.02}
	}
	return xys
}

func formatAll(values plotter.Values) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = fmt.Sprintf("%.4g", v)
	}
	return out
}
