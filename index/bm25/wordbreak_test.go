package bm25

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// wordBreakProbes are the texts each code point c is put in; bench/lucene_wordbreak.py has
// the same list.
var wordBreakProbes = []string{"a{c}a", "1{c}1", "{c}", "{c}{c}", "\u05d0{c}\u05d0", "{c}a", "\u30ab{c}\u30ab",
	"\u263a{c}", "{c}\u20e3", "\U0001F466{c}", "\U0001F468\u200d{c}"}

// signature is, per probe, the [start, end) of each token in code points, as
// bench/lucene_wordbreak.py writes Lucene's.
func signature(c rune) string {
	var sig []string
	for _, p := range wordBreakProbes {
		text := strings.ReplaceAll(p, "{c}", string(c))
		var spans []string
		tokenize(text, func(start, end int) {
			spans = append(spans, fmt.Sprintf("%d-%d", utf8.RuneCountInString(text[:start]), utf8.RuneCountInString(text[:end])))
		})
		sig = append(sig, strings.Join(spans, ","))
	}
	return strings.Join(sig, "|")
}

// TestTokenizerMatchesLucene: every code point of planes 0-3 and 14 in eleven contexts
// (letters, digits, Hebrew, Katakana, emoji, keycaps, joiners) is cut into the tokens that
// Lucene 9.5's StandardTokenizer made of it (testdata/lucene_wordbreak.json, recorded with
// bench/lucene_wordbreak.py).
func TestTokenizerMatchesLucene(t *testing.T) {
	b, err := os.ReadFile("testdata/lucene_wordbreak.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Lucene string
		Probes []string
		Ranges [][3]any
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	if strings.Join(ref.Probes, "\x00") != strings.Join(wordBreakProbes, "\x00") {
		t.Fatalf("the reference was recorded with other probes: %q", ref.Probes)
	}
	bad, n := 0, 0
	for _, r := range ref.Ranges {
		lo, hi, want := rune(r[0].(float64)), rune(r[1].(float64)), r[2].(string)
		for c := lo; c <= hi; c++ {
			n++
			if got := signature(c); got != want {
				if bad++; bad <= 20 {
					t.Errorf("U+%04X %q: got %s, Lucene %s", c, c, got, want)
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d code points tokenized unlike Lucene %s", bad, n, ref.Lucene)
	}
	if n < 250000 {
		t.Errorf("only %d code points in the reference", n)
	}
}
