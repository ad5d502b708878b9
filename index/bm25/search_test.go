package bm25

import (
	"container/heap"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"needle/testkit/testenv"
)

// exhaustive is the oracle of Search: every posting of every query term scored, the k best
// kept, ties adjusted.
func exhaustive(x *Index, text string, k int) ([]int64, []float32) {
	var s searcher
	s.queryCursors(x, text)
	scores := map[int64]float64{}
	for _, c := range s.cursors {
		for p, doc := c.post, int64(-1); len(p) > 0; {
			d, n := binary.Uvarint(p)
			f, m := binary.Uvarint(p[n:])
			p, doc = p[n+m:], doc+int64(d)
			scores[doc] += float64(termScore(c.weight, impact(f, x.normInverse[x.norms[doc]])))
		}
	}
	top := topHeap{x: x}
	for doc, sc := range scores {
		top.offer(hit{doc, float32(sc)}, k)
	}
	rows, dist := make([]int64, top.Len()), make([]float32, top.Len())
	for i := len(rows) - 1; i >= 0; i-- {
		h := heap.Pop(&top).(hit)
		rows[i], dist[i] = h.row, h.score
	}
	adjustTies(dist)
	return rows, dist
}

// TestPrunedEqualsExhaustive: block-max MaxScore returns the rows and scores of scoring every
// posting, on every query of the parity set and on generated queries of 1 to 12 words drawn
// from the corpus (common words with long postings among them), for k from 1 to 1,000; over
// the parity corpus and over 30,000 generated rows of Zipfian words, where common terms span
// hundreds of blocks.
func TestPrunedEqualsExhaustive(t *testing.T) {
	zipf := filepath.Join(t.TempDir(), "zipf.jsonl")
	writeZipfCorpus(t, zipf, 30000)
	for _, corpus := range []string{"testdata/corpus.jsonl", zipf} {
		t.Run(filepath.Base(corpus), func(t *testing.T) { prunedEqualsExhaustive(t, corpus) })
	}
}

// writeZipfCorpus writes rows of 5 to 60 words drawn from a Zipfian vocabulary of 20,000.
func writeZipfCorpus(t testing.TB, path string, rows int) {
	rng := rand.New(rand.NewPCG(3, 4))
	z := rand.NewZipf(rand.New(rand.NewPCG(5, 6)), 1.1, 1, 19999)
	var b strings.Builder
	for i := range rows {
		fmt.Fprintf(&b, `{"id": "z%d", "contents": "`, i)
		for j := range 5 + rng.IntN(56) {
			if j > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "w%x", z.Uint64())
		}
		b.WriteString("\"}\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func prunedEqualsExhaustive(t *testing.T, corpus string) {
	dir := t.TempDir()
	if err := Build(BuildConfig{Corpus: corpus, Out: dir}); err != nil {
		t.Fatal(err)
	}
	x, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	var queries []string
	for _, q := range testenv.ReadJSONL[struct{ Query string }](t, "testdata/queries.jsonl") {
		queries = append(queries, q.Query)
	}
	var words []string
	for _, r := range testenv.ReadJSONL[struct{ Contents string }](t, corpus) {
		words = append(words, strings.Fields(r.Contents)...)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 600 {
		q := make([]string, 1+rng.IntN(12))
		for i := range q {
			q[i] = words[rng.IntN(len(words))] // frequent words come up often, as in text
		}
		queries = append(queries, strings.Join(q, " "))
	}
	bad := 0
	for i, q := range queries {
		k := []int{1, 3, 10, 100, 1000}[i%5]
		dist, labels := make([]float32, k), make([]int64, k)
		if err := x.Search(context.Background(), []string{q}, k, dist, labels); err != nil {
			t.Fatal(err)
		}
		n := slices.Index(labels, -1)
		if n < 0 {
			n = k
		}
		wantRows, wantDist := exhaustive(x, q, k)
		if !slices.Equal(labels[:n], wantRows) || !slices.Equal(dist[:n], wantDist) {
			if bad++; bad <= 5 {
				t.Errorf("%q k=%d:\n got %v %v\nwant %v %v", q, k, labels[:n], dist[:n], wantRows, wantDist)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d queries differ from exhaustive scoring", bad, len(queries))
	}
}
