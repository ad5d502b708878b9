package bm25

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"needle/testkit/testenv"
)

// The files of testdata/ named pyserini_* are real outputs of pyserini 0.22.1 (Anserini
// 0.22.1, Lucene 9, openjdk 17) made by bench/pyserini_bm25.py: `index corpus.jsonl`,
// `search ... queries.jsonl 10 pyserini_top10.jsonl` and `analyze` on the texts listed in
// pyserini_analyze.jsonl (odd words, symbols, emoji sequences, joiners and format characters,
// many scripts, and every cased letter below U+20000 to check lowercasing). corpus.jsonl is the first 2,000 WordNet passages of tools/wordnet
// and six rows of punctuation, possessives, non-ASCII text and a 600-letter word; queries.jsonl
// 300 WordNet example sentences and ten odd queries (empty, stop words only, over-long).
// realtext_corpus.jsonl and realtext_queries.jsonl are real English text, made by
// bench/realtext_corpus.py (its docstring has the command): 600 entries of the Jargon File
// (public domain; curly quotes, dashes, ™, soft hyphens, no-break spaces and code as written),
// 300 natural queries drawn from them and the script's 102 odd ones; pyserini_realtext_top10.jsonl
// is pyserini's search of them.

func TestAnalyzerMatchesPyserini(t *testing.T) {
	type row struct {
		Text  string
		Terms []string
	}
	for _, r := range testenv.ReadJSONL[row](t, "testdata/pyserini_analyze.jsonl") {
		if got := analyze(r.Text); !slices.Equal(got, r.Terms) && !(len(got) == 0 && len(r.Terms) == 0) {
			t.Errorf("analyze(%.80q)\n got %q\nwant %q", r.Text, got, r.Terms)
		}
	}
}

// TestSearchMatchesPyserini: every top-10 list of needle's index equals pyserini's, ids and
// scores bit for bit (pyserini's 4-decimal rounding and tie lowering included), on the WordNet
// set and on the real-text one (Jargon File rows and queries of bench/realtext_corpus.py).
func TestSearchMatchesPyserini(t *testing.T) {
	for _, set := range []struct{ corpus, reference string }{
		{"testdata/corpus.jsonl", "testdata/pyserini_top10.jsonl"},
		{"testdata/realtext_corpus.jsonl", "testdata/pyserini_realtext_top10.jsonl"},
	} {
		t.Run(set.corpus, func(t *testing.T) { searchMatchesPyserini(t, set.corpus, set.reference) })
	}
}

func searchMatchesPyserini(t *testing.T, corpus, reference string) {
	dir := t.TempDir()
	if err := Build(BuildConfig{Corpus: corpus, Out: dir}); err != nil {
		t.Fatal(err)
	}
	x, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	want := testenv.ReadJSONL[pyseriniHits](t, reference)
	queries := make([]string, len(want))
	for i, w := range want {
		queries[i] = w.Query
	}
	const k = 10
	dist, labels := make([]float32, len(want)*k), make([]int64, len(want)*k)
	if err := x.Search(context.Background(), queries, k, dist, labels); err != nil {
		t.Fatal(err)
	}
	differ := comparePyserini(x, want, dist, labels, k)
	for _, d := range differ[:min(len(differ), 5)] {
		t.Error(d)
	}
	if len(differ) > 0 {
		t.Errorf("%d of %d top-10 lists differ from pyserini's", len(differ), len(want))
	}
	if len(want) < 300 {
		t.Fatalf("only %d reference queries", len(want))
	}
}

// TestRowsKeepTheirPlace: rows without text (no contents, not JSON, stop words only) keep
// their row numbers, are never hit and leave the others' scores alone.
func TestRowsKeepTheirPlace(t *testing.T) {
	dir := t.TempDir()
	corpus := filepath.Join(dir, "c.jsonl")
	lines := `{"id":"0","contents":"red apple"}
{"id":"1"}
not json
{"id":"3","contents":"the of and"}
{"id":"4","contents":42}
{"id":"5","contents":"green apple pie"}`
	if err := os.WriteFile(corpus, []byte(lines), 0o644); err != nil { // no final newline
		t.Fatal(err)
	}
	x := buildAndOpen(t, corpus, filepath.Join(dir, "ix"))
	m := x.Meta()
	if m.Rows != 6 || m.DocCount != 2 || m.BadRows != 3 || m.SumTotalTermFreq != 5 {
		t.Errorf("meta %+v: want 6 rows, doc count 2, 3 bad rows, 5 terms", m)
	}
	dist, labels := make([]float32, 3*4), make([]int64, 3*4)
	if err := x.Search(context.Background(), []string{"apple", "", "the and"}, 4, dist, labels); err != nil {
		t.Fatal(err)
	}
	if got := labels[:4]; !slices.Equal(got, []int64{0, 5, -1, -1}) {
		t.Errorf("apple: rows %v, want 0, 5", got)
	}
	for _, l := range labels[4:] {
		if l != -1 {
			t.Errorf("a query without terms hit row %d", l)
		}
	}
	if string(x.id(5)) != "5" || string(x.id(2)) != "" || string(x.id(4)) != "4" {
		t.Errorf("ids %q %q %q", x.id(5), x.id(2), x.id(4))
	}
}
