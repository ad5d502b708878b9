// Package prom writes Prometheus's text exposition format (version 0.0.4): the one writer of
// needle's /metrics. Parts with figures of their own (the GPU index) report them as Metric
// values; the server writes them with its own. A Registry holds the labeled counters and gauges
// that the weight-transfer daemons update as they run (registry.go).
package prom

import (
	"io"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
)

// Metric is one metric family: its name, type ("counter", "gauge", "histogram"), help text
// and samples.
type Metric struct {
	Name, Type, Help string
	Samples          []Sample
}

// Sample is one line of a family: labels written as `key="value",...` ("" for none).
type Sample struct {
	Labels string
	Value  float64
}

// Counter and Gauge are families of one unlabeled sample.
func Counter(name, help string, v float64) Metric {
	return Metric{name, "counter", help, []Sample{{"", v}}}
}
func Gauge(name, help string, v float64) Metric {
	return Metric{name, "gauge", help, []Sample{{"", v}}}
}

// Writer writes families to w; write errors are the caller's writer's to report (an HTTP
// response), so they are not returned.
type Writer struct{ w io.Writer }

func NewWriter(w io.Writer) Writer { return Writer{w} }

// Write writes each family: its HELP and TYPE lines, then its samples.
func (p Writer) Write(ms ...Metric) {
	for _, m := range ms {
		p.head(m.Name, m.Type, m.Help)
		for _, s := range m.Samples {
			p.sample(m.Name, s.Labels, s.Value)
		}
	}
}

func (p Writer) head(name, typ, help string) {
	io.WriteString(p.w, "# HELP "+name+" "+help+"\n# TYPE "+name+" "+typ+"\n")
}

func (p Writer) sample(name, labels string, v float64) {
	if labels != "" {
		name += "{" + labels + "}"
	}
	io.WriteString(p.w, name+" "+format(v)+"\n")
}

// format writes integers as integers and other values in the shortest decimal form.
func format(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// Histogram has fixed upper bounds; safe for concurrent use.
type Histogram struct {
	bounds []float64
	counts []atomic.Uint64 // counts[i]: observations <= bounds[i]; last: +Inf (not cumulative)
	sum    atomic.Uint64   // float64 bits
}

func NewHistogram(bounds ...float64) *Histogram {
	return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe counts v.
func (h *Histogram) Observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Labeled is a histogram with the labels of its samples ("" for none).
type Labeled struct {
	Labels string
	H      *Histogram
}

// Histograms writes one histogram family of the given histograms.
func (p Writer) Histograms(name, help string, hs ...Labeled) {
	p.head(name, "histogram", help)
	for _, l := range hs {
		sep := ""
		if l.Labels != "" {
			sep = ","
		}
		var cum uint64
		for i, b := range l.H.bounds {
			cum += l.H.counts[i].Load()
			p.sample(name+"_bucket", l.Labels+sep+`le="`+format(b)+`"`, float64(cum))
		}
		cum += l.H.counts[len(l.H.bounds)].Load()
		p.sample(name+"_bucket", l.Labels+sep+`le="+Inf"`, float64(cum))
		p.sample(name+"_sum", l.Labels, math.Float64frombits(l.H.sum.Load()))
		p.sample(name+"_count", l.Labels, float64(cum))
	}
}

// Label writes one label pair key="value", the value escaped as the exposition format wants
// (backslash, double quote and newline; other bytes, UTF-8 included, as they are). For values
// that come from users (file paths), where Go's %q would write \u escapes Prometheus keeps.
func Label(key, value string) string {
	return key + `="` + labelEscaper.Replace(value) + `"`
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
