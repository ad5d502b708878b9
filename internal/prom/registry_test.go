package prom

import (
	"strings"
	"sync"
	"testing"
)

// TestRegistry: the same name and labels give one series, concurrent adds all count, and the
// text lists families by name and series by labels.
func TestRegistry(t *testing.T) {
	r := NewRegistry()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				r.Counter("b_total", "B.", "kind", "delta").Add(1)
			}
		}()
	}
	wg.Wait()
	r.Counter("b_total", "B.", "kind", "full").Add(2.5)
	r.Gauge("a", "A.").Set(7)
	var b strings.Builder
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP a A.
# TYPE a gauge
a 7
# HELP b_total B.
# TYPE b_total counter
b_total{kind="delta"} 8000
b_total{kind="full"} 2.5
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
