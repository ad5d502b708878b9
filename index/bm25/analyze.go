package bm25

import (
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// AnalyzerName names the analysis below in index metadata: pyserini's default for English
// (Anserini's DefaultEnglishAnalyzer, the same chain as Lucene's EnglishAnalyzer).
const AnalyzerName = "lucene-english: StandardTokenizer(255, Unicode 12.1, emoji), EnglishPossessiveFilter, LowerCaseFilter, StopFilter(english), PorterStemFilter"

// stopWords is Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET.
var stopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "but": true,
	"by": true, "for": true, "if": true, "in": true, "into": true, "is": true, "it": true, "no": true,
	"not": true, "of": true, "on": true, "or": true, "such": true, "that": true, "the": true,
	"their": true, "then": true, "there": true, "these": true, "they": true, "this": true, "to": true,
	"was": true, "will": true, "with": true,
}

// Analyzer turns text into index terms as pyserini's default analyzer does. It holds
// scratch buffers: one Analyzer per goroutine.
type Analyzer struct {
	term  []byte
	units []uint16
}

// Terms calls emit with each term of text in order. term is valid only during the call.
func (a *Analyzer) Terms(text string, emit func(term []byte)) {
	tokenize(text, func(start, end int) {
		if t := a.analyzeWord(text[start:end]); t != nil {
			emit(t)
		}
	})
}

// analyzeWord runs the filters after the tokenizer on one word; nil for a stop word.
func (a *Analyzer) analyzeWord(word string) []byte {
	word = stripPossessive(word)
	ascii := true
	a.term = a.term[:0]
	for i := 0; i < len(word); i++ {
		c := word[i]
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		a.term = append(a.term, c)
	}
	if ascii {
		if len(a.term) <= 5 && stopWords[string(a.term)] {
			return nil
		}
		a.term = stem(a.term)
		return a.term
	}
	// Java lowercases and stems UTF-16 code units; a lowered non-ASCII word is never a
	// stop word.
	a.units = a.units[:0]
	for _, r := range word {
		a.units = utf16.AppendRune(a.units, unicode.ToLower(r))
	}
	a.term = a.term[:0]
	for _, r := range utf16.Decode(stem(a.units)) {
		a.term = utf8.AppendRune(a.term, r)
	}
	return a.term
}

// stripPossessive removes a trailing 's, ’s or ＇s (either case of s), as Lucene's
// EnglishPossessiveFilter does before lowercasing.
func stripPossessive(w string) string {
	n := len(w)
	if n < 2 || (w[n-1] != 's' && w[n-1] != 'S') {
		return w
	}
	switch {
	case w[n-2] == '\'':
		return w[:n-2]
	case n >= 4 && w[n-4:n-1] == "\u2019", n >= 4 && w[n-4:n-1] == "\uff07":
		return w[:n-4]
	}
	return w
}
