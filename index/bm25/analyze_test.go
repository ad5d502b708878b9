package bm25

import (
	"slices"
	"strings"
	"testing"
)

func analyze(text string) []string {
	var a Analyzer
	var out []string
	a.Terms(text, func(t []byte) { out = append(out, string(t)) })
	return out
}

// TestAnalyzeLucene: outputs of pyserini 0.22.1's default analyzer
// (pyserini.analysis.Analyzer(get_lucene_analyzer()).analyze) on the same texts.
func TestAnalyzeLucene(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{"The dog's running quickly U.S.A. e-mail 3.14 1,000 a:b don't x_y caresses ponies relational generalization",
			[]string{"dog", "run", "quickli", "u.s.a", "e", "mail", "3.14", "1,000", "a:b", "don't", "x_y", "caress", "poni", "relat", "gener"}},
		{"", nil},
		{"the of and THE", nil},
	} {
		if got := analyze(c.text); !slices.Equal(got, c.want) {
			t.Errorf("analyze(%q)\n got %q\nwant %q", c.text, got, c.want)
		}
	}
}

func TestLongWordIsCut(t *testing.T) {
	got := analyze(strings.Repeat("x", 600))
	if len(got) != 3 || len(got[0]) != 255 || len(got[2]) != 90 {
		t.Errorf("600 x: got %d terms of lengths %v", len(got), lens(got))
	}
}

func lens(s []string) []int {
	var n []int
	for _, x := range s {
		n = append(n, len(x))
	}
	return n
}
