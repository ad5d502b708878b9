package bert

import (
	"context"
	"math/rand"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"needle/internal/procstat"
	"needle/kernels/bert/nn"
	"needle/testkit/testenv"
)

// glosses are 256 WordNet glosses (short passages), the texts of the encode benchmarks.
func glosses(b *testing.B) []string {
	type row struct{ Contents string }
	corpus := testenv.ReadJSONL[row](b, "testdata/wordnet_corpus.jsonl")[:256]
	texts := make([]string, len(corpus))
	for i, r := range corpus {
		texts[i] = r.Contents
	}
	return texts
}

// BenchmarkEncodeGlosses encodes 256 WordNet glosses (short passages) per iteration.
func BenchmarkEncodeGlosses(b *testing.B) {
	e := loadMiniLM(b)
	texts := glosses(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.Encode(texts, ""); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(texts))/b.Elapsed().Seconds(), "texts/s")
}

// BenchmarkEncodeContextStop encodes 64 glosses (one batch) per iteration under a context
// canceled at a random moment of it, and reports how long EncodeContext took to return after
// the cancel (stop-ms: median and max over the stopped iterations): how long a batch whose
// clients all left keeps the encoder.
func BenchmarkEncodeContextStop(b *testing.B) {
	e := loadMiniLM(b)
	texts := glosses(b)[:64]
	began := time.Now()
	if _, err := e.Encode(texts, ""); err != nil {
		b.Fatal(err)
	}
	batch := time.Since(began)
	r := rand.New(rand.NewSource(1))
	var stops []float64
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		var canceled atomic.Int64
		time.AfterFunc(time.Duration(r.Int63n(int64(batch))), func() {
			canceled.Store(time.Now().UnixNano())
			cancel()
		})
		_, err := e.EncodeContext(ctx, texts, "")
		if at := canceled.Load(); err != nil && at != 0 {
			stops = append(stops, float64(time.Now().UnixNano()-at)/1e6)
		}
		cancel()
	}
	if len(stops) > 0 {
		slices.Sort(stops)
		b.ReportMetric(stops[len(stops)/2], "stop-ms-median")
		b.ReportMetric(stops[len(stops)-1], "stop-ms-max")
	}
}

const benchQuery = "a member of the genus Canis that has been domesticated"

// BenchmarkEncodeQuery encodes one short query per iteration: the serve path's latency.
func BenchmarkEncodeQuery(b *testing.B) {
	e := loadMiniLM(b)
	for b.Loop() {
		if _, err := e.Encode([]string{benchQuery}, "query: "); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPrecisions runs the fp16, int8 and (where the CPU has it) bf16 encoders alternately
// on the same inputs and reports each one's passages/s on 256 glosses and single-query
// latency, and the speedups over fp16. On a shared machine wall time swings with the
// neighbours' load: alternating spreads it over all, the fastest round of each is reported
// beside the mean, and the CPU-time speedups (cpu-*) count the time the Linears' thread team
// spins between jobs too (kernels/bert/nn/team.c).
func BenchmarkPrecisions(b *testing.B) {
	precs := []Precision{FP16, Int8}
	if ops, _ := nn.Selected(); ops.HasBF16() {
		precs = append(precs, BF16)
	}
	var encs []*Encoder
	for _, p := range precs {
		encs = append(encs, loadMiniLMAt(b, p))
	}
	texts := glosses(b)
	const queries = 20                                                                                                                   // per round and precision
	total, best, cpu := make([][2]time.Duration, len(precs)), make([][2]time.Duration, len(precs)), make([][2]time.Duration, len(precs)) // [precision][passages, query]
	for b.Loop() {
		for i, e := range encs {
			for j, run := range []func() error{
				func() error { _, err := e.Encode(texts, ""); return err },
				func() error {
					for range queries {
						if _, err := e.Encode([]string{benchQuery}, "query: "); err != nil {
							return err
						}
					}
					return nil
				},
			} {
				t0, c0 := time.Now(), procstat.CPU()
				if err := run(); err != nil {
					b.Fatal(err)
				}
				d := time.Since(t0)
				cpu[i][j] += procstat.CPU() - c0
				total[i][j] += d
				if best[i][j] == 0 || d < best[i][j] {
					best[i][j] = d
				}
			}
		}
	}
	n := float64(b.N)
	for i, p := range precs {
		b.ReportMetric(n*float64(len(texts))/total[i][0].Seconds(), string(p)+"-passages/s")
		b.ReportMetric(total[i][1].Seconds()/n/queries*1e6, string(p)+"-query-us")
		if i == 0 {
			continue
		}
		ratio := func(x [][2]time.Duration, j int) float64 { return x[0][j].Seconds() / x[i][j].Seconds() }
		b.ReportMetric(ratio(total, 0), string(p)+"-passages-speedup")
		b.ReportMetric(ratio(total, 1), string(p)+"-query-speedup")
		b.ReportMetric(ratio(best, 0), "best-"+string(p)+"-passages-speedup")
		b.ReportMetric(ratio(best, 1), "best-"+string(p)+"-query-speedup")
		b.ReportMetric(ratio(cpu, 0), "cpu-"+string(p)+"-passages-speedup")
		b.ReportMetric(ratio(cpu, 1), "cpu-"+string(p)+"-query-speedup")
	}
}
