package bm25

import (
	"unicode"
	"unicode/utf8"
)

// maxTokenUnits is StandardTokenizer's default maxTokenLength, in UTF-16 code units (Java
// chars): a longer word is cut into pieces of at most this length.
const maxTokenUnits = 255

// wordClass is a rune's Word_Break class (Unicode UAX #29), as far as Lucene's
// StandardTokenizer needs it to find words.
type wordClass uint8

const (
	wbOther          wordClass = iota
	wbLetter                   // ALetter, Hebrew_Letter, Hangul
	wbNumeric                  // decimal digits
	wbKatakana                 // joins with Katakana
	wbExtendNumLet             // '_' and the other connector punctuation: joins words
	wbMidLetter                // ':' and friends: joins letters on both sides
	wbMidNumLet                // '.', '\'', '’': joins letters or digits on both sides
	wbMidNum                   // ',', ';': joins digits on both sides
	wbExtend                   // combining marks, format characters: belong to the rune before
	wbIdeographic              // Han, Hiragana: one token per character
	wbSouthEastAsian           // Thai, Lao, Myanmar, Khmer: a run is one token (no dictionary)
)

// classOf returns r's class. Lucene's grammar is generated from the Unicode tables of its
// JFlex; Go's unicode package is newer, which matters only for characters added since.
func classOf(r rune) wordClass {
	if r < utf8.RuneSelf {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
			return wbLetter
		case '0' <= r && r <= '9':
			return wbNumeric
		}
		switch r {
		case '_':
			return wbExtendNumLet
		case ':':
			return wbMidLetter
		case '.', '\'':
			return wbMidNumLet
		case ',', ';':
			return wbMidNum
		}
		return wbOther
	}
	switch r {
	case 0x00B7, 0x0387, 0x05F4, 0x2027, 0xFE13, 0xFE55, 0xFF1A:
		return wbMidLetter
	case 0x2018, 0x2019, 0x2024, 0xFE52, 0xFF07, 0xFF0E:
		return wbMidNumLet
	case 0x037E, 0x0589, 0x060C, 0x060D, 0x066C, 0x07F8, 0x2044, 0xFE10, 0xFE14, 0xFE50, 0xFE54, 0xFF0C, 0xFF1B:
		return wbMidNum
	case 0x202F:
		return wbExtendNumLet
	}
	switch {
	case unicode.In(r, unicode.Han, unicode.Hiragana):
		return wbIdeographic
	case unicode.Is(unicode.Katakana, r):
		return wbKatakana
	case unicode.In(r, unicode.Thai, unicode.Lao, unicode.Myanmar, unicode.Khmer):
		if unicode.In(r, unicode.Mn, unicode.Mc) {
			return wbExtend
		}
		return wbSouthEastAsian
	case unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc, unicode.Cf):
		return wbExtend
	case unicode.IsLetter(r):
		return wbLetter
	case unicode.Is(unicode.Nd, r):
		return wbNumeric
	case unicode.Is(unicode.Pc, r):
		return wbExtendNumLet
	}
	return wbOther
}

// utf16Len is the number of UTF-16 code units of r.
func utf16Len(r rune) int {
	if r >= 0x10000 {
		return 2
	}
	return 1
}

// joins reports whether a word whose last rune is of class last goes on with a rune of
// class next (UAX #29 rules WB5, WB8-WB10, WB13-WB13b).
func joins(last, next wordClass) bool {
	switch next {
	case wbLetter, wbNumeric:
		return last == wbLetter || last == wbNumeric || last == wbExtendNumLet
	case wbKatakana:
		return last == wbKatakana || last == wbExtendNumLet
	case wbExtendNumLet:
		return last == wbLetter || last == wbNumeric || last == wbKatakana || last == wbExtendNumLet
	case wbSouthEastAsian:
		return last == wbSouthEastAsian
	}
	return false
}

// bridges reports whether a rune of class mid between runes of classes last and next keeps
// them in one word (WB6/WB7: letters around ':', '.', '\”; WB11/WB12: digits around ',',
// ';', '.', '\”).
func bridges(last, mid, next wordClass) bool {
	switch {
	case last == wbLetter && next == wbLetter:
		return mid == wbMidLetter || mid == wbMidNumLet
	case last == wbNumeric && next == wbNumeric:
		return mid == wbMidNum || mid == wbMidNumLet
	}
	return false
}

// scanner walks text rune by rune, each rune with the Extend runes after it (WB4).
type scanner struct {
	text string
	pos  int
}

// next returns the class of the rune at pos, and the end and UTF-16 length of that rune
// with its Extend runes; ok is false at the end of text.
func (s *scanner) peek(pos int) (c wordClass, end, units int, ok bool) {
	if pos >= len(s.text) {
		return wbOther, pos, 0, false
	}
	r, n := utf8.DecodeRuneInString(s.text[pos:])
	c, end, units = classOf(r), pos+n, utf16Len(r)
	for end < len(s.text) {
		r, n := utf8.DecodeRuneInString(s.text[end:])
		if r < utf8.RuneSelf || classOf(r) != wbExtend {
			break
		}
		end, units = end+n, units+utf16Len(r)
	}
	return c, end, units, true
}

// tokenize calls emit with each word of text that Lucene's StandardTokenizer (UAX #29 word
// boundaries, default maxTokenLength 255) emits: runs of letters and digits joined by the
// rules above, Han and Hiragana characters one by one, Katakana and South-East Asian runs.
// Words of connector punctuation alone are not emitted. The emitted string is a slice of
// text. Emoji, which Lucene emits as tokens of their own, are skipped here.
func tokenize(text string, emit func(word string)) {
	s := scanner{text: text}
	for s.pos < len(text) {
		c, end, units, _ := s.peek(s.pos)
		switch c {
		case wbIdeographic:
			emit(text[s.pos:end])
			s.pos = end
			continue
		case wbLetter, wbNumeric, wbKatakana, wbExtendNumLet, wbSouthEastAsian:
		default:
			s.pos = end
			continue
		}
		start, last, word := s.pos, c, c != wbExtendNumLet
		s.pos = end
		for {
			nc, nend, nunits, ok := s.peek(s.pos)
			if !ok {
				break
			}
			switch {
			case joins(last, nc):
			case nc == wbMidLetter || nc == wbMidNumLet || nc == wbMidNum:
				ac, aend, aunits, ok := s.peek(nend)
				if !ok || !bridges(last, nc, ac) || units+nunits+aunits > maxTokenUnits {
					goto done
				}
				units, s.pos, last = units+nunits+aunits, aend, ac
				continue
			default:
				goto done
			}
			if units+nunits > maxTokenUnits {
				break
			}
			units, s.pos, last = units+nunits, nend, nc
			word = word || nc != wbExtendNumLet
		}
	done:
		if word {
			emit(text[start:s.pos])
		}
	}
}
