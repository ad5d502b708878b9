package bench

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"needle/cuda"
)

// The CPU path of `needle bench search` runs FAISS on synthetic rows and reports figures that
// agree with each other (QPS = batch / best time, GB/s = rows x dim x 4 / best time).
func TestSearchCPU(t *testing.T) {
	var out strings.Builder
	opt := SearchOptions{Rows: 3000, Dim: 32, Metric: "l2", Batch: 5, K: 7, Rounds: 3, Threads: 1, Seed: 3, Plot: filepath.Join(t.TempDir(), "run.png")}
	if err := Search(&out, opt); err != nil {
		t.Fatal(err)
	}
	var rep searchReport
	if err := json.Unmarshal([]byte(out.String()), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if rep.Backend != "faiss-cpu" || rep.Rows != 3000 || rep.Dim != 32 || rep.Metric != "L2" || rep.K != 7 ||
		rep.BestSeconds <= 0 || rep.MedianSecs < rep.BestSeconds || rep.PeakReadGB <= 0 {
		t.Fatalf("report %+v", rep)
	}
	if png, err := os.ReadFile(opt.Plot); err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
		t.Errorf("--plot: %v", err)
	}
	if q := 5 / rep.BestSeconds; q != rep.QPS {
		t.Errorf("QPS %g, want %g", rep.QPS, q)
	}
	if g := 3000 * 32 * 4 / rep.BestSeconds / 1e9; g != rep.GBps || rep.ReadShare != g/rep.PeakReadGB {
		t.Errorf("GB/s %g share %g, want %g", rep.GBps, rep.ReadShare, g)
	}
}

// Bad flags and --gpu without a GPU are errors that say why.
func TestSearchErrors(t *testing.T) {
	base := SearchOptions{Rows: 10, Dim: 4, Metric: "ip", Batch: 1, K: 1, Rounds: 1}
	for _, tc := range []struct {
		edit func(*SearchOptions)
		want string
	}{
		{func(o *SearchOptions) { o.Batch = 0 }, "Batch: 0, want > 0"},
		{func(o *SearchOptions) { o.Metric = "cosine" }, "Metric: "},
		{func(o *SearchOptions) { o.Rows = 0 }, "Rows: 0, want > 0"},
		{func(o *SearchOptions) { o.Index = "/nonexistent/x.index" }, "no such file"},
	} {
		o := base
		tc.edit(&o)
		if err := Search(&strings.Builder{}, o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", o, err, tc.want)
		}
	}
	if _, err := cuda.Open(0); err == nil {
		return // a GPU is present: the GPU check runs --gpu for real
	}
	o := base
	o.GPU = true
	if err := Search(&strings.Builder{}, o); !errors.Is(err, cuda.ErrNoDevice) || !strings.HasPrefix(err.Error(), "GPU: ") {
		t.Errorf("--gpu without a GPU: %v", err)
	}
}
