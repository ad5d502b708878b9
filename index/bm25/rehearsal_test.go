package bm25

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"needle/testkit/testenv"
)

// TestRehearsal is the by-hand BM25 rehearsal (docs/measurements/2026-11-27-bm25-pruning.md):
// with NEEDLE_BM25_INDEX (a built folder) and NEEDLE_BM25_QUERIES ({"query"} lines) set, it
// times Search one query at a time, grouped by the postings the query's terms hold; times
// exhaustive scoring (the oracle) on the same queries; times the whole query set as one call
// against one call per query; checks the hits equal pyserini's where NEEDLE_BM25_PYSERINI
// (bench/pyserini_bm25.py search output) is set; and writes the figures as JSON to
// NEEDLE_BM25_OUT. Skipped without them.
func TestRehearsal(t *testing.T) {
	dir, qpath := os.Getenv("NEEDLE_BM25_INDEX"), os.Getenv("NEEDLE_BM25_QUERIES")
	if dir == "" || qpath == "" {
		t.Skip("NEEDLE_BM25_INDEX and NEEDLE_BM25_QUERIES not set")
	}
	x, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	var queries []string
	for _, q := range testenv.ReadJSONL[struct{ Query string }](t, qpath) {
		queries = append(queries, q.Query)
	}
	const k = 10
	ctx := context.Background()
	out := map[string]any{"queries": len(queries), "rows": x.Ntotal(), "terms": x.Meta().Terms}
	// one at a time, pruned and exhaustive alternating, grouped by postings of the query
	groups := []int64{0, 5_000, 50_000, 500_000, 5_000_000, 1 << 62}
	pruned, full := map[int][]time.Duration{}, map[int][]time.Duration{}
	var all, allFull []time.Duration
	dist, labels := make([]float32, k), make([]int64, k)
	for _, q := range queries {
		g := slices.IndexFunc(groups[1:], func(lim int64) bool { return postingsOf(x, q) < lim })
		t0 := time.Now()
		if err := x.Search(ctx, []string{q}, k, dist, labels); err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		exhaustive(x, q, k)
		t2 := time.Now()
		pruned[g], full[g] = append(pruned[g], t1.Sub(t0)), append(full[g], t2.Sub(t1))
		all, allFull = append(all, t1.Sub(t0)), append(allFull, t2.Sub(t1))
	}
	for g := range groups[:len(groups)-1] {
		if len(pruned[g]) > 0 {
			out[fmt.Sprintf("postings_%d_%d", groups[g], groups[g+1])] = map[string]any{"n": len(pruned[g]),
				"median_ms": ms(pct(pruned[g], 50)), "exhaustive_median_ms": ms(pct(full[g], 50))}
		}
	}
	out["median_ms"], out["p99_ms"] = ms(pct(all, 50)), ms(pct(all, 99))
	out["exhaustive_median_ms"], out["exhaustive_p99_ms"] = ms(pct(allFull, 50)), ms(pct(allFull, 99))
	// the whole set in one call against one call per query, alternating, three rounds each
	bulkD, bulkL := make([]float32, len(queries)*k), make([]int64, len(queries)*k)
	var oneCall, perQuery []time.Duration
	for range 3 {
		t0 := time.Now()
		if err := x.Search(ctx, queries, k, bulkD, bulkL); err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		for q := range queries {
			x.Search(ctx, queries[q:q+1], k, bulkD[q*k:], bulkL[q*k:])
		}
		oneCall, perQuery = append(oneCall, t1.Sub(t0)), append(perQuery, time.Since(t1))
	}
	out["one_call_s"], out["one_by_one_s"] = slices.Min(oneCall).Seconds(), slices.Min(perQuery).Seconds()
	if ref := os.Getenv("NEEDLE_BM25_PYSERINI"); ref != "" {
		out["pyserini_equal"], out["pyserini_compared"] = comparePyserini(t, x, ref, bulkD, bulkL, k)
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	t.Logf("%s", b)
	if p := os.Getenv("NEEDLE_BM25_OUT"); p != "" {
		os.WriteFile(p, b, 0o644)
	}
}

// comparePyserini counts the queries whose ids and scores equal pyserini's in ref.
func comparePyserini(t *testing.T, x *Index, ref string, dist []float32, labels []int64, k int) (equal, n int) {
	for q, w := range testenv.ReadJSONL[struct {
		Docids []string
		Scores []float32
	}](t, ref) {
		var ids []string
		var scores []float32
		for j := q * k; j < (q+1)*k && labels[j] >= 0; j++ {
			ids, scores = append(ids, string(x.id(labels[j]))), append(scores, dist[j])
		}
		if slices.Equal(ids, w.Docids) && slices.Equal(scores, w.Scores) {
			equal++
		}
		n++
	}
	return equal, n
}

// postingsOf is the number of postings of the query's terms.
func postingsOf(x *Index, q string) int64 {
	var s searcher
	s.queryCursors(x, q)
	var n int64
	for _, c := range s.cursors {
		for p := c.post; len(p) > 0; n++ {
			_, a := binary.Uvarint(p)
			_, b := binary.Uvarint(p[a:])
			p = p[a+b:]
		}
	}
	return n
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
