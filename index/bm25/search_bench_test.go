package bm25

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"needle/internal/procstat"
	"needle/testkit/testenv"
)

// BenchmarkSearchPOST: 2,000 queries of 1-8 words from 30,000 Zipfian rows, in one Search call
// (shared among the cores) and one call per query, alternating; reports the one-call speedup
// and the process CPU time of each way: on a shared machine the wall-time speedup depends on
// what else runs, while equal CPU times show that sharing the queries costs no extra work.
func BenchmarkSearchPOST(b *testing.B) {
	dir := b.TempDir()
	corpus := filepath.Join(dir, "zipf.jsonl")
	writeZipfCorpus(b, corpus, 30000)
	if err := Build(BuildConfig{Corpus: corpus, Out: filepath.Join(dir, "ix")}); err != nil {
		b.Fatal(err)
	}
	x, err := Open(filepath.Join(dir, "ix"))
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	rows := testenv.ReadJSONL[struct{ Contents string }](b, corpus)
	rng := rand.New(rand.NewPCG(7, 8))
	queries := make([]string, 2000)
	for i := range queries {
		words := strings.Fields(rows[rng.IntN(len(rows))].Contents)
		rng.Shuffle(len(words), func(i, j int) { words[i], words[j] = words[j], words[i] })
		queries[i] = strings.Join(words[:1+rng.IntN(min(8, len(words)))], " ")
	}
	const k = 10
	dist, labels := make([]float32, len(queries)*k), make([]int64, len(queries)*k)
	ctx := context.Background()
	var one, each, oneCPU, eachCPU time.Duration
	for b.Loop() {
		t0, c0 := time.Now(), procstat.CPU()
		if err := x.Search(ctx, queries, k, dist, labels); err != nil {
			b.Fatal(err)
		}
		t1, c1 := time.Now(), procstat.CPU()
		for q := range queries {
			if err := x.Search(ctx, queries[q:q+1], k, dist[q*k:], labels[q*k:]); err != nil {
				b.Fatal(err)
			}
		}
		one, each = one+t1.Sub(t0), each+time.Since(t1)
		oneCPU, eachCPU = oneCPU+c1-c0, eachCPU+procstat.CPU()-c1
	}
	b.ReportMetric(each.Seconds()/one.Seconds(), "speedup")
	b.ReportMetric(one.Seconds()/float64(b.N), "one-call-s")
	b.ReportMetric(each.Seconds()/float64(b.N), "one-by-one-s")
	b.ReportMetric(oneCPU.Seconds()/float64(b.N), "one-call-cpu-s")
	b.ReportMetric(eachCPU.Seconds()/float64(b.N), "one-by-one-cpu-s")
}
