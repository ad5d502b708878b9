package bm25

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// FuzzAnalyze: any text analyzes without panicking into non-empty terms of valid UTF-8, at
// most 255 UTF-16 units long (StandardTokenizer's limit), none a stop word.
func FuzzAnalyze(f *testing.F) {
	for _, s := range []string{"", "The dog's U.S.A. 3.14 1,000 a:b don't x_y", strings.Repeat("é", 300), "日本語のテキスト", "a'", "'s", "..,,::", "x\u0301\u0301y", "ﬃ İ ß",
		"© ® ™ 👍🏽 👨\u200d👩\u200d👧 🇺🇸 #️⃣ zero\u200bwidth soft\u00adhyphen", "\u200d\u200d👍\u200d", strings.Repeat("👨\u200d", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var a Analyzer
		a.Terms(text, func(term []byte) {
			s := string(term)
			if s == "" || stopWords[s] {
				t.Fatalf("%q: term %q", text, s)
			}
			if utf8.Valid([]byte(text)) && !utf8.ValidString(s) {
				t.Fatalf("%q: term %q is not UTF-8", text, s)
			}
			if n := len(utf16.Encode([]rune(s))); n > maxTokenUnits {
				t.Fatalf("%q: term of %d units", text, n)
			}
		})
	})
}

// FuzzTokenize: token spans are non-empty, in order, inside the text and at most 255 UTF-16
// units long.
func FuzzTokenize(f *testing.F) {
	for _, s := range []string{"", "a.b 1,2 __x__", "👩🏽\u200d💻 ©\ufe0f 1\ufe0f\u20e3", strings.Repeat("\u05d0'", 300), "ไทย" + strings.Repeat("\u0e48", 400)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		last := 0
		tokenize(text, func(start, end int) {
			if start < last || end <= start || end > len(text) {
				t.Fatalf("%q: span [%d, %d) after %d", text, start, end, last)
			}
			if n := len(utf16.Encode([]rune(text[start:end]))); n > maxTokenUnits {
				t.Fatalf("%q: token of %d units", text, n)
			}
			last = end
		})
	})
}

// FuzzTokenizeFastPath: tokenize cuts any text as the general matcher alone does.
func FuzzTokenizeFastPath(f *testing.F) {
	for _, s := range []string{"The quick brown fox, 42 times.", "a_b x.y don't 1,000 3.14 a:b", "cafe\u0301 x\u200by", "#1 *2 1\u20e3 a*b",
		strings.Repeat("a", 255) + " " + strings.Repeat("b", 256) + " " + strings.Repeat("7", 300), "\"quoted\"\nline\ttab", "ab\xffcd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var got, want []int
		tokenize(text, func(start, end int) { got = append(got, start, end) })
		scanTokens(text, false, func(start, end int) { want = append(want, start, end) })
		if !slices.Equal(got, want) {
			t.Fatalf("%q: spans %v, the general matcher's %v", text, got, want)
		}
	})
}
