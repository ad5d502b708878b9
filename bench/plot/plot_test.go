package plot

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// figure has every part: two latency panels, the rate panel and bars.
func figure() Figure {
	var f Figure
	f.Title = "test run"
	reqs := Latencies{Of: "request"}
	for i := range 500 {
		at := time.Duration(i) * 7 * time.Millisecond
		reqs.D = append(reqs.D, time.Duration(2000+i%97*40)*time.Microsecond)
		f.Finished = append(f.Finished, Finish{At: at, Queries: 4})
	}
	f.Latencies = []Latencies{reqs, {Of: "single query", D: []time.Duration{time.Millisecond}}}
	f.Bars = &Bars{Title: "read bandwidth", Unit: "GB/s", Bars: []Bar{{"needle", 11.5}, {"limit", 14.2}}}
	return f
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, magic string }{{"run.svg", "<?xml"}, {"run.PNG", "\x89PNG"}} {
		path := filepath.Join(dir, c.name)
		if err := Write(path, figure()); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil || !bytes.HasPrefix(b, []byte(c.magic)) {
			t.Fatalf("%s: %v, starts %.20q", c.name, err, b)
		}
		if c.magic == "<?xml" {
			for _, want := range []string{"request latency, 500 measured", "p99", "queries/s over the run", "read bandwidth"} {
				if !strings.Contains(string(b), want) {
					t.Errorf("the SVG lacks %q", want)
				}
			}
		}
	}
}

func TestWriteRefuses(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct {
		path string
		f    Figure
		want string
	}{
		"nothing measured": {filepath.Join(dir, "a.svg"), Figure{Title: "x"}, "measured nothing"},
		"no latencies":     {filepath.Join(dir, "a.svg"), Figure{Latencies: []Latencies{{Of: "request"}}}, "no request latencies"},
		"extension":        {filepath.Join(dir, "a.pdf"), figure(), "want a .svg or .png"},
	} {
		if err := Write(c.path, c.f); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
	if err := Check(filepath.Join(dir, "missing", "a.svg")); err == nil {
		t.Error("Check of a path in a missing folder: no error")
	}
	if err := Check(filepath.Join(dir, "a.jpg")); err == nil {
		t.Error("Check of a .jpg: no error")
	}
	if err := Check(filepath.Join(dir, "a.svg")); err != nil {
		t.Error(err)
	}
}

func TestPercentile(t *testing.T) {
	sorted := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0, 1}, {.5, 6}, {.9, 10}, {.99, 10}, {1, 10}} {
		if got := Percentile(sorted, c.p); got != c.want {
			t.Errorf("Percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if Percentile(nil, .5) != 0 {
		t.Error("Percentile of none is not 0")
	}
}
