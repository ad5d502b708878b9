package wordpiece

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"needle/testkit/testenv"
)

// benchTexts are the benchmark inputs: "english" is ~100-word passages of real English
// (WordNet glosses, as "passage: " + text, like e5 corpus encoding); "multilingual" is
// the curated edge cases (accents, CJK, scripts, emoji, long words), repeated to about
// 1 MB so that CPU timers resolve it.
func benchTexts(b *testing.B) map[string][]string {
	glosses := wordnetGlosses(b, 40000)
	if len(glosses) == 0 {
		b.Skip("no WordNet glosses")
	}
	var english []string
	var p strings.Builder
	words := 0
	for _, g := range glosses {
		if words == 0 {
			p.WriteString("passage: ")
		}
		p.WriteString(g)
		p.WriteString(" ")
		if words += strings.Count(g, " ") + 1; words >= 100 {
			english = append(english, p.String())
			p.Reset()
			words = 0
		}
	}
	var multilingual []string
	for textBytes(multilingual) < 1e6 {
		multilingual = append(multilingual, curated...)
	}
	return map[string][]string{"english": english, "multilingual": multilingual}
}

func textBytes(texts []string) int64 {
	var n int64
	for _, s := range texts {
		n += int64(len(s))
	}
	return n
}

// BenchmarkEncode: single-goroutine AppendEncode throughput at max_length 256 (one op
// = every text of the set once; MB/s over UTF-8 input).
func BenchmarkEncode(b *testing.B) {
	tok, _ := loadMiniLM(b)
	sets := benchTexts(b)
	for _, name := range []string{"english", "multilingual"} {
		texts := sets[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(textBytes(texts))
			b.ReportAllocs()
			ids := make([]int32, 0, 256)
			for b.Loop() {
				for _, s := range texts {
					ids = tok.AppendEncode(ids[:0], s, 256)
				}
			}
		})
	}
}

// BenchmarkVsHF compares single-core throughput with PyPI tokenizers (Rust) on the same
// texts at max_length 256, in CPU time rather than wall time (the machine is shared):
// this package's AppendEncode on a locked OS thread (RUSAGE_THREAD) against
// encode_batch with RAYON_NUM_THREADS=1 (process CPU time, loading excluded), best of 5
// each. It reports go-MB/s, hf-MB/s and their ratio x-hf.
func BenchmarkVsHF(b *testing.B) {
	tok, tokJSON := loadMiniLM(b)
	py := testenv.Python(b)
	sets := benchTexts(b)
	for _, name := range []string{"english", "multilingual"} {
		texts := sets[name]
		in := writeJSONLines(b, texts)
		mb := float64(textBytes(texts)) / 1e6
		b.Run(name, func(b *testing.B) {
			var goMBps, hfMBps float64
			for b.Loop() {
				goMBps = mb / bestThreadCPU(b, 5, func() {
					ids := make([]int32, 0, 256)
					for _, s := range texts {
						ids = tok.AppendEncode(ids[:0], s, 256)
					}
				})
				cmd := exec.Command(py, filepath.Join("testdata", "hf_tokenize.py"), "bench", tokJSON, "256", in)
				cmd.Env = append(os.Environ(), "RAYON_NUM_THREADS=1")
				out, err := cmd.Output()
				if err != nil {
					b.Fatalf("hf_tokenize.py bench: %v", err)
				}
				if hfMBps, err = strconv.ParseFloat(strings.Fields(string(out))[0], 64); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(goMBps, "go-MB/s")
			b.ReportMetric(hfMBps, "hf-MB/s")
			b.ReportMetric(goMBps/hfMBps, "x-hf")
		})
	}
}

// bestThreadCPU runs f n times on one locked OS thread and returns the least CPU time
// (user + system seconds) of that thread for one run.
func bestThreadCPU(b *testing.B, n int, f func()) float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	best := math.Inf(1)
	for range n {
		before := threadCPU(b)
		f()
		best = min(best, threadCPU(b)-before)
	}
	return best
}

func threadCPU(b *testing.B) float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		b.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
