package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// The case names are the report's rows; their order is delta encode, delta apply, logprob,
// the fused linear logprob.
func TestKernelCaseNames(t *testing.T) {
	var names []string
	for _, c := range kernelCases() {
		names = append(names, c.name)
	}
	want := []string{
		"delta encode bf16 1GiB 0.5% changed", "delta encode bf16 1GiB 1.0% changed", "delta encode bf16 1GiB 2.0% changed",
		"delta apply bf16 1GiB 0.5% changed", "delta apply bf16 1GiB 1.0% changed", "delta apply bf16 1GiB 2.0% changed",
		"logprob bf16 N=1024 V=151936", "logprob bf16 N=2048 V=151936", "linear logprob fp32 N=256 h=1024 V=32768",
	}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Fatalf("cases:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
}

// smallCases are the real kernels on small inputs, so a report runs in milliseconds.
func smallCases() []kernelCase {
	return append(deltaCases(1<<20), logprobCase(8, 1000), linearCase(8, 16, 1000))
}

func TestKernelsJSONReport(t *testing.T) {
	var out bytes.Buffer
	opt := KernelsOptions{JSON: true, Threads: 2, MinTime: time.Millisecond, MembwMiB: 1, Only: "1.0%"}
	if err := runKernels(&out, opt, smallCases()); err != nil {
		t.Fatal(err)
	}
	var rep kernelReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if rep.SIMD == "" || rep.CUDA == "" || rep.MembwBytes != 1<<20 || rep.ReadGBps["1"] <= 0 || rep.ReadGBps["2"] <= 0 {
		t.Errorf("header fields: %+v", rep)
	}
	// --only keeps the two 1.0% delta cases, each with 1 and 2 threads.
	want := []string{"delta encode bf16 1MiB 1.0% changed", "delta apply bf16 1MiB 1.0% changed"}
	if len(rep.Results) != 4 {
		t.Fatalf("results: %+v, want 2 cases x 2 thread counts", rep.Results)
	}
	for i, r := range rep.Results {
		if r.Name != want[i/2] || r.Threads != 1+i%2 {
			t.Errorf("result %d: %s with %d threads, want %s with %d", i, r.Name, r.Threads, want[i/2], 1+i%2)
		}
		if r.Seconds <= 0 || r.GBps <= 0 || r.GElemsPerSec <= 0 || r.PerThread <= 0 || r.BWFraction <= 0 {
			t.Errorf("result %d: a rate is not positive: %+v", i, r)
		}
	}
	// encode reads old and new (2 x 1 MiB); apply writes the 1 MiB tensor.
	if got := rep.Results[0].GBps / rep.Results[0].GElemsPerSec; math.Abs(got-4) > 1e-9 {
		t.Errorf("encode bytes per element = %v, want 4", got)
	}
	if got := rep.Results[2].GBps / rep.Results[2].GElemsPerSec; math.Abs(got-2) > 1e-9 {
		t.Errorf("apply bytes per element = %v, want 2", got)
	}
}

func TestKernelsTable(t *testing.T) {
	var out bytes.Buffer
	opt := KernelsOptions{Threads: 1, MinTime: time.Millisecond, MembwMiB: 1, Only: "logprob"}
	if err := runKernels(&out, opt, smallCases()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "SIMD level: ") || !strings.HasPrefix(lines[1], "CUDA: ") ||
		!strings.HasPrefix(lines[2], "memory read bandwidth, 1 thread(s): ") || !strings.HasSuffix(lines[2], " GB/s (1 MiB buffer)") ||
		!strings.Contains(lines[3], "kernel  threads  best ms  GB/s") || !strings.HasPrefix(strings.TrimSpace(lines[4]), "logprob bf16 N=8 V=1000        1 ") ||
		!strings.HasPrefix(strings.TrimSpace(lines[5]), "linear logprob fp32 N=8 h=16 V=1000        1 ") {
		t.Fatalf("report:\n%s", out.String())
	}
}

func TestKernelsBadOptions(t *testing.T) {
	for _, opt := range []KernelsOptions{
		{Threads: 0, MinTime: time.Second, MembwMiB: 1},
		{Threads: 1, MinTime: 0, MembwMiB: 1},
		{Threads: 1, MinTime: time.Second, MembwMiB: 0},
	} {
		if err := Kernels(&bytes.Buffer{}, opt); err == nil || !strings.Contains(err.Error(), ", want > 0") {
			t.Errorf("%+v: err = %v", opt, err)
		}
	}
}
