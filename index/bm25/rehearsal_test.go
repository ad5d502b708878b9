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
// exhaustive scoring (the oracle) on the same queries unless NEEDLE_BM25_EXHAUSTIVE=0 (at
// millions of rows it takes seconds a query); times the whole query set as one call against
// one call per query; where NEEDLE_BM25_PYSERINI (bench/pyserini_bm25.py search output, k 10)
// is set, fails unless every top-10 list (ids and scores) equals pyserini's, naming the first
// that differ, and groups pyserini's times by the same postings; and writes the figures as JSON
// to NEEDLE_BM25_OUT. Skipped without them.
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
	withExhaustive := os.Getenv("NEEDLE_BM25_EXHAUSTIVE") != "0"
	ref := os.Getenv("NEEDLE_BM25_PYSERINI")
	var pyserini []pyseriniHits
	if ref != "" {
		pyserini = testenv.ReadJSONL[pyseriniHits](t, ref)
	}
	// one at a time, pruned and exhaustive alternating, grouped by postings of the query
	groups := []int64{0, 5_000, 50_000, 500_000, 5_000_000, 50_000_000, 1 << 62}
	pruned, full, lucene := map[int][]time.Duration{}, map[int][]time.Duration{}, map[int][]time.Duration{}
	var all, allFull []time.Duration
	// each query's group is found once, before the timed loop, so that the searches run back to
	// back as pyserini's timed loop runs them (a query's postings walked between searches did
	// not change the medians consistently: docs/measurements/2026-11-28-bm25-latency.md)
	group := make([]int, len(queries))
	for i, q := range queries {
		n := postingsOf(x, q)
		group[i] = slices.IndexFunc(groups[1:], func(lim int64) bool { return n < lim })
	}
	dist, labels := make([]float32, k), make([]int64, k)
	for i, q := range queries {
		g := group[i]
		t0 := time.Now()
		if err := x.Search(ctx, []string{q}, k, dist, labels); err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		pruned[g], all = append(pruned[g], t1.Sub(t0)), append(all, t1.Sub(t0))
		if withExhaustive {
			exhaustive(x, q, k)
			t2 := time.Now()
			full[g], allFull = append(full[g], t2.Sub(t1)), append(allFull, t2.Sub(t1))
		}
		if i < len(pyserini) {
			lucene[g] = append(lucene[g], time.Duration(pyserini[i].Ms*float64(time.Millisecond)))
		}
	}
	for g := range groups[:len(groups)-1] {
		if len(pruned[g]) > 0 {
			row := map[string]any{"n": len(pruned[g]), "median_ms": ms(pct(pruned[g], 50)), "p99_ms": ms(pct(pruned[g], 99))}
			if withExhaustive {
				row["exhaustive_median_ms"] = ms(pct(full[g], 50))
			}
			if len(lucene[g]) > 0 {
				row["pyserini_median_ms"], row["pyserini_p99_ms"] = ms(pct(lucene[g], 50)), ms(pct(lucene[g], 99))
			}
			out[fmt.Sprintf("postings_%d_%d", groups[g], groups[g+1])] = row
		}
	}
	out["median_ms"], out["p99_ms"] = ms(pct(all, 50)), ms(pct(all, 99))
	if withExhaustive {
		out["exhaustive_median_ms"], out["exhaustive_p99_ms"] = ms(pct(allFull, 50)), ms(pct(allFull, 99))
	}
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
	var differ []string
	if ref != "" {
		differ = comparePyserini(x, pyserini, bulkD, bulkL, k)
		out["pyserini_equal"], out["pyserini_compared"] = len(pyserini)-len(differ), len(pyserini)
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	t.Logf("%s", b)
	if p := os.Getenv("NEEDLE_BM25_OUT"); p != "" {
		os.WriteFile(p, b, 0o644)
	}
	// after the figures are written: a differing list is a parity bug, not a slower run
	for _, d := range differ[:min(len(differ), 10)] {
		t.Error(d)
	}
	if len(differ) > 0 {
		t.Errorf("%d of %d top-10 lists differ from pyserini's", len(differ), len(pyserini))
	}
}

// pyseriniHits is a line of bench/pyserini_bm25.py search output.
type pyseriniHits struct {
	Query  string
	Docids []string
	Scores []float32
	Ms     float64 // LuceneSearcher.search's time for the query
}

// comparePyserini describes each query whose ids or scores differ from pyserini's.
func comparePyserini(x *Index, pyserini []pyseriniHits, dist []float32, labels []int64, k int) (differ []string) {
	for q, w := range pyserini {
		var ids []string
		var scores []float32
		for j := q * k; j < (q+1)*k && labels[j] >= 0; j++ {
			ids, scores = append(ids, string(x.id(labels[j]))), append(scores, dist[j])
		}
		if !slices.Equal(ids, w.Docids) || !slices.Equal(scores, w.Scores) {
			differ = append(differ, fmt.Sprintf("query %d %q:\n got %q %v\nwant %q %v", q, w.Query, ids, scores, w.Docids, w.Scores))
		}
	}
	return differ
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
