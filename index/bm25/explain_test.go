package bm25

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"needle/testkit/testenv"
)

// TestExplainSumsToTheSearchScore: for every hit of every parity query, the explanation's
// score is bit for bit the score Search ranked the row by, its terms' scores add up to it,
// each term's score is Lucene's formula over the parts it shows, and the reported score is
// what Search returned for the first hit (never tie-adjusted).
func TestExplainSumsToTheSearchScore(t *testing.T) {
	x := buildAndOpen(t, "testdata/corpus.jsonl", filepath.Join(t.TempDir(), "idx"))
	queries := testenv.ReadJSONL[struct{ Query string }](t, "testdata/queries.jsonl")
	checked := 0
	for _, q := range queries {
		var s searcher
		s.queryCursors(x, q.Query)
		s.top = topHeap{x: x}
		s.topK(x, 10)
		var first *Explanation
		for s.top.Len() > 0 {
			h := heap.Pop(&s.top).(hit)
			e := x.explainRow(q.Query, h.row)
			first = e // the last popped is the best
			if math.Float32bits(e.Score) != math.Float32bits(h.score) {
				t.Fatalf("%q row %d: explained %v, search scored %v", q.Query, h.row, e.Score, h.score)
			}
			var sum float64
			for _, ts := range e.Terms {
				sum += float64(ts.Score)
				if ts.Freq == 0 {
					if ts.Score != 0 {
						t.Errorf("%q row %d: term %q absent but scores %v", q.Query, h.row, ts.Term, ts.Score)
					}
					continue
				}
				f := float64(ts.Freq)
				want := float64(ts.IDF) * float64(ts.Count) * f / (f + float64(e.K1)*(1-float64(e.B)+float64(e.B)*float64(e.Length)/float64(e.AvgDL)))
				if math.Abs(float64(ts.Score)-want) > 1e-5*want {
					t.Errorf("%q row %d term %q: %v, formula %v (%+v)", q.Query, h.row, ts.Term, ts.Score, want, ts)
				}
			}
			if float32(sum) != e.Score {
				t.Errorf("%q row %d: terms sum to %v, score %v", q.Query, h.row, float32(sum), e.Score)
			}
			checked++
		}
		if first == nil {
			continue
		}
		dist, labels := make([]float32, 1), make([]int64, 1)
		if err := x.Search(context.Background(), []string{q.Query}, 1, dist, labels); err != nil {
			t.Fatal(err)
		}
		if labels[0] != first.Row || dist[0] != first.Reported {
			t.Errorf("%q: Search's first hit %d %v, explained %d %v", q.Query, labels[0], dist[0], first.Row, first.Reported)
		}
	}
	if checked < 100 {
		t.Fatalf("only %d hits explained", checked)
	}
}

// TestExplainByID: Explain finds the row by its corpus id, shows a query term the row lacks
// with no score, and names an id that no row has.
func TestExplainByID(t *testing.T) {
	x := buildAndOpen(t, "testdata/corpus.jsonl", filepath.Join(t.TempDir(), "idx"))
	e, err := x.Explain("physical zebra", "1") // row 1: "physical entity" / an entity that has physical existence
	if err != nil {
		t.Fatal(err)
	}
	if e.Row != 1 || e.ID != "1" || len(e.Terms) != 2 || e.Terms[0].Term != "physic" || e.Terms[0].Freq != 2 ||
		e.Terms[1].Term != "zebra" || e.Terms[1].Freq != 0 || e.Terms[1].Score != 0 || e.Score != e.Terms[0].Score {
		t.Errorf("explanation %+v", e)
	}
	if _, err := x.Explain("physical", "no such id"); err == nil {
		t.Error("an unknown id explained")
	}
	var b strings.Builder
	if err := e.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fmt.Sprintf("score %v", e.Score), "physic", "zebra"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}
