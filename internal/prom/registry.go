package prom

import (
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"needle/internal/writer"
)

// Value is a float64 that goroutines update without a lock.
type Value struct{ bits atomic.Uint64 }

// Add adds d.
func (v *Value) Add(d float64) {
	for {
		old := v.bits.Load()
		if v.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// Set sets the value.
func (v *Value) Set(x float64) { v.bits.Store(math.Float64bits(x)) }

// Get returns the value.
func (v *Value) Get() float64 { return math.Float64frombits(v.bits.Load()) }

type family struct {
	name, help, kind string
	series           map[string]*Value // by rendered label set, "" for none
}

// Registry keeps a process's labeled counters and gauges for GET /metrics (the weight-transfer
// daemons' figures), written by Writer. Updates of a Value are lock-free; the registry's lock is
// taken only to add a series and to write them all.
type Registry struct {
	mu       sync.Mutex
	families map[string]*family
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{families: map[string]*family{}} }

// Counter returns the counter name{labels} (labels alternate key, value), adding it on first
// use; the same name and labels give the same Value.
func (r *Registry) Counter(name, help string, labels ...string) *Value {
	return r.get(name, help, "counter", labels)
}

// Gauge is Counter for a value that goes up and down.
func (r *Registry) Gauge(name, help string, labels ...string) *Value {
	return r.get(name, help, "gauge", labels)
}

func (r *Registry) get(name, help, kind string, labels []string) *Value {
	var b strings.Builder
	for i := 0; i+1 < len(labels); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(Label(labels[i], labels[i+1]))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.families[name]
	if !ok {
		m = &family{name: name, help: help, kind: kind, series: map[string]*Value{}}
		r.families[name] = m
	}
	v, ok := m.series[b.String()]
	if !ok {
		v = &Value{}
		m.series[b.String()] = v
	}
	return v
}

// WriteTo writes every family through Writer, sorted by name and labels.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	fams := make([]Metric, 0, len(r.families))
	for _, m := range r.families {
		f := Metric{Name: m.name, Type: m.kind, Help: m.help}
		for labels, v := range m.series {
			f.Samples = append(f.Samples, Sample{Labels: labels, Value: v.Get()})
		}
		sort.Slice(f.Samples, func(i, j int) bool { return f.Samples[i].Labels < f.Samples[j].Labels })
		fams = append(fams, f)
	}
	r.mu.Unlock()
	sort.Slice(fams, func(i, j int) bool { return fams[i].Name < fams[j].Name })
	cw := &writer.Counting{W: w} // Writer leaves counting and errors to its caller's writer
	NewWriter(cw).Write(fams...)
	return cw.N, cw.Err
}

// ServeHTTP answers GET /metrics.
func (r *Registry) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	r.WriteTo(w)
}
