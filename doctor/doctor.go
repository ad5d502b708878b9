// Package doctor is `needle doctor`: what needle will use on this machine and why (CPU and
// SIMD level, BLAS, threads, memory, GPU), and whether a model and an index load and agree.
// Each check is one Check in the Report; a check of something needed that fails makes the
// command exit non-zero (docs/doctor.md). It only reads: nothing is built or written.
package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Status of a Check.
const (
	OK      = "ok"
	Warn    = "warn"    // works, but slower or riskier than it could be
	Missing = "missing" // something needed is absent or does not load: the command fails
	Info    = "info"    // absent, and not needed (a GPU without --gpu)
)

// Check is one line of the report.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Value  string `json:"value"`
	Why    string `json:"why,omitempty"` // how the value was chosen, or what to do
}

// Report is every check, in the order they ran, and how long they took.
type Report struct {
	Checks  []Check       `json:"checks"`
	Elapsed time.Duration `json:"-"`
	Seconds float64       `json:"seconds"`
}

// Options say what else to check besides the machine.
type Options struct {
	Index string // a `needle build` folder or a bare FAISS index file ("": none)
	Model string // an encoder model folder ("": the index manifest's, if any)
	GPU   bool   // a GPU is needed: its absence is Missing, not Info
}

// Run runs every check.
func Run(opt Options) Report {
	start := time.Now()
	var r Report
	r.Checks = append(r.Checks, machine()...)
	r.Checks = append(r.Checks, gpu(opt.GPU)...)
	r.Checks = append(r.Checks, milvus())
	if opt.Index != "" || opt.Model != "" {
		r.Checks = append(r.Checks, served(opt.Index, opt.Model)...)
	}
	r.Elapsed = time.Since(start)
	r.Seconds = r.Elapsed.Seconds()
	return r
}

// Failed says whether a needed check failed.
func (r Report) Failed() bool {
	for _, c := range r.Checks {
		if c.Status == Missing {
			return true
		}
	}
	return false
}

// WriteText writes the report for people: one aligned line per check, its why below it.
func (r Report) WriteText(w io.Writer) error {
	width := 0
	for _, c := range r.Checks {
		width = max(width, len(c.Name))
	}
	var b strings.Builder
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "%-7s %-*s  %s\n", "["+c.Status+"]", width, c.Name, c.Value)
		if c.Why != "" {
			fmt.Fprintf(&b, "%-7s %-*s  %s\n", "", width, "", c.Why)
		}
	}
	verdict := "everything needed is here"
	if r.Failed() {
		verdict = "something needed is missing (see [missing] above)"
	}
	fmt.Fprintf(&b, "needle doctor: %s (%.2f s)\n", verdict, r.Seconds)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the report as one JSON object.
func (r Report) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(struct {
		Report
		Failed bool `json:"failed"`
	}{r, r.Failed()})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
