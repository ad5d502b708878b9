package prom

import (
	"strings"
	"sync"
	"testing"
)

func TestWriteFamilies(t *testing.T) {
	var b strings.Builder
	w := NewWriter(&b)
	w.Write(Counter("needle_requests_total", "Requests served.", 3),
		Metric{"needle_bytes", "gauge", "Bytes held.", []Sample{{`kind="docs"`, 1.5}, {`kind="index"`, 1e9}}})
	want := `# HELP needle_requests_total Requests served.
# TYPE needle_requests_total counter
needle_requests_total 3
# HELP needle_bytes Bytes held.
# TYPE needle_bytes gauge
needle_bytes{kind="docs"} 1.5
needle_bytes{kind="index"} 1000000000
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// Buckets are cumulative in the output, +Inf equals the count, and concurrent observations
// all land in the sum.
func TestHistogram(t *testing.T) {
	h := NewHistogram(0.01, 0.1)
	var wg sync.WaitGroup
	for _, v := range []float64{0.0078125, 0.0625, 0.0625, 7} { // exact in binary: the sum is order-free
		wg.Add(1)
		go func() { defer wg.Done(); h.Observe(v) }()
	}
	wg.Wait()
	var b strings.Builder
	NewWriter(&b).Histograms("lat_seconds", "Latency.", Labeled{`path="/retrieve"`, h}, Labeled{"", NewHistogram(1)})
	want := `# HELP lat_seconds Latency.
# TYPE lat_seconds histogram
lat_seconds_bucket{path="/retrieve",le="0.01"} 1
lat_seconds_bucket{path="/retrieve",le="0.1"} 3
lat_seconds_bucket{path="/retrieve",le="+Inf"} 4
lat_seconds_sum{path="/retrieve"} 7.1328125
lat_seconds_count{path="/retrieve"} 4
lat_seconds_bucket{le="1"} 0
lat_seconds_bucket{le="+Inf"} 0
lat_seconds_sum 0
lat_seconds_count 0
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestLabel(t *testing.T) {
	for _, c := range []struct{ value, want string }{
		{"plain", `k="plain"`},
		{`/data/"idx"\n` + "\n" + "é", `k="/data/\"idx\"\\n\n` + "é\""},
	} {
		if got := Label("k", c.value); got != c.want {
			t.Errorf("Label(%q) = %s, want %s", c.value, got, c.want)
		}
	}
}
