package bm25

import "unicode/utf8"

// maxTokenUnits is StandardTokenizer's default maxTokenLength, in UTF-16 code units (Java
// chars). Lucene's scanner sees at most this many units from a token's start, so a longer word
// is cut into pieces of at most this length.
const maxTokenUnits = 255

// maxWindowBytes bounds the UTF-8 bytes of maxTokenUnits units (a 3-byte rune is one unit,
// a 4-byte rune two), so that matching never reads far past a token.
const maxWindowBytes = 3 * maxTokenUnits

// wordClass is a rune's Word_Break class (Unicode 12.1, UAX #29) as far as Lucene's
// StandardTokenizer grammar tells classes apart; the values are those of wordclass_table.go.
type wordClass uint8

const (
	wbOther        wordClass = iota
	wbLetter                 // ALetter
	wbHebrew                 // Hebrew_Letter
	wbNumeric                // Numeric, and the fullwidth digits
	wbKatakana               // Katakana
	wbExtendNumLet           // '_' and the other connector punctuation: joins words
	wbMidLetter              // ':' and friends: joins letters on both sides
	wbMidNumLet              // '.', '’': joins letters or digits on both sides
	wbMidNum                 // ',', ';': joins digits on both sides
	wbSingleQuote            // '\”: as MidNumLet, and may end a Hebrew word
	wbDoubleQuote            // '"': joins Hebrew letters
	wbExtend                 // Extend, Format, ZWJ: belong to the rune before (WB4)
	wbRegional               // Regional_Indicator: two make a flag emoji
	wbHebrewQuote            // not a rune's class: the state after a Hebrew letter and '\”
)

// Flags of a rune beside its class (wordclass_table.go).
const (
	fHan       = 1 << iota // Script=Han: one token per character
	fHiragana              // Script=Hiragana: one token per character
	fComplex               // Line_Break=Complex_Context (Thai, Lao, Myanmar, Khmer): a run is one token
	fEmoji                 // Lucene's EmojiChar: Extended_Pictographic, or Emoji other than [0-9#*©®™〰〽], RI, modifiers
	fEmojiBase             // Emoji_Modifier_Base
	fEmojiMod              // Emoji_Modifier (skin tones)
)

const (
	zwj             = 0x200D
	presentationSel = 0xFE0F // emoji presentation selector
	textSel         = 0xFE0E // text presentation selector
	keycap          = 0x20E3
)

type wordRange struct {
	lo, hi uint32
	class  wordClass
	flags  uint8
}

// bmpProps holds class | flags<<8 for every rune below 0x10000.
var bmpProps = func() *[0x10000]uint16 {
	var t [0x10000]uint16
	for _, r := range wordRanges {
		for c := r.lo; c <= r.hi && c < 0x10000; c++ {
			t[c] = uint16(r.class) | uint16(r.flags)<<8
		}
	}
	return &t
}()

// props returns r's class and flags.
func props(r rune) (wordClass, uint8) {
	if r < 0x10000 {
		p := bmpProps[r]
		return wordClass(p), uint8(p >> 8)
	}
	lo, hi := 0, len(wordRanges)
	for lo < hi {
		m := (lo + hi) / 2
		switch w := wordRanges[m]; {
		case uint32(r) < w.lo:
			hi = m
		case uint32(r) > w.hi:
			lo = m + 1
		default:
			return w.class, w.flags
		}
	}
	return wbOther, 0
}

// runeAt decodes the rune at s[i:]; size 0 at the end of s.
func runeAt(s string, i int) (r rune, size int) {
	if i >= len(s) {
		return utf8.RuneError, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// extendEnd returns the end of the run of Extend, Format and ZWJ runes at s[i:]; without
// the presentation selectors when sansSel (Lucene's ExtFmtZwjSansPresSel).
func extendEnd(s string, i int, sansSel bool) int {
	for {
		r, n := runeAt(s, i)
		if n == 0 {
			return i
		}
		if c, _ := props(r); c != wbExtend || sansSel && (r == presentationSel || r == textSel) {
			return i
		}
		i += n
	}
}

// unit returns the class of the rune at s[i:] and the end of it with its Extend runes (a
// grammar's "Ex" unit); wbOther and i at the end of s.
func unit(s string, i int) (wordClass, uint8, int) {
	if i < len(s) && s[i] < utf8.RuneSelf && (i+1 == len(s) || s[i+1] < utf8.RuneSelf) {
		p := bmpProps[s[i]] // no ASCII rune is Extend: the unit ends here
		return wordClass(p), uint8(p >> 8), i + 1
	}
	r, n := runeAt(s, i)
	if n == 0 {
		return wbOther, 0, i
	}
	c, f := props(r)
	return c, f, extendEnd(s, i+n, false)
}

// tokenize calls emit with the byte span text[start:end] of each token that Lucene 9's
// StandardTokenizer emits. The scanner takes the longest match of its rules at each position (words and
// numbers, emoji sequences, South-East Asian runs, single Han and Hiragana characters) and
// skips one rune where none matches.
func tokenize(text string, emit func(start, end int)) { scanTokens(text, true, emit) }

// scanTokens is tokenize, with its ASCII fast path or (the reference the fast path is tested
// against) without.
func scanTokens(text string, fast bool, emit func(start, end int)) {
	for pos := 0; pos < len(text); {
		// ASCII fast path (a tenth of a build's CPU went to the general matcher): a byte that
		// starts no token is skipped, and a run of letters and digits that an ASCII byte which
		// joins nothing ends is a word, as longestMatch finds; anything else goes to it.
		switch kind := asciiKinds[text[pos]]; {
		case !fast:
		case kind == asciiNone:
			pos++
			continue
		case kind == asciiCore:
			end := pos + 1
			for end < len(text) && asciiKinds[text[end]] == asciiCore {
				end++
			}
			if end-pos <= maxTokenUnits && (end == len(text) || asciiKinds[text[end]] == asciiNone) {
				emit(pos, end)
				pos = end
				continue
			}
		}
		if n := tokenLen(text[pos:]); n > 0 {
			emit(pos, pos+n)
			pos += n
			continue
		}
		_, n := runeAt(text, pos)
		pos += n
	}
}

// Kinds of bytes for tokenize's ASCII fast path.
const (
	asciiOther = iota // not ASCII, or an ASCII byte that may join or start a token otherwise
	asciiNone         // starts no token and joins none: Word_Break Other, no emoji (not '#' or '*', keycap starts)
	asciiCore         // a letter or digit
)

// asciiKinds is the kind of every byte value, from the word classes.
var asciiKinds = func() (k [256]uint8) {
	for c := range rune(utf8.RuneSelf) {
		switch class, flags := props(c); {
		case class == wbLetter || class == wbNumeric:
			k[c] = asciiCore
		case class == wbOther && flags == 0 && c != '#' && c != '*':
			k[c] = asciiNone
		}
	}
	return k
}()

// tokenLen returns the length of the token at the start of s, 0 if none starts there.
func tokenLen(s string) int {
	if len(s) > maxWindowBytes {
		s = s[:maxWindowBytes]
	}
	n := longestMatch(s)
	if n > maxTokenUnits { // bytes: only then can the units pass the window
		w := window(s)
		if len(w) < n {
			n = longestMatch(w)
		}
	}
	return n
}

// window is the prefix of s that Lucene's scanner buffer holds: maxTokenUnits UTF-16 units.
func window(s string) string {
	units := 0
	for i, r := range s {
		if units += 1 + bool2int(r >= 0x10000); units > maxTokenUnits {
			return s[:i]
		}
	}
	return s
}

func bool2int(b bool) int {
	if b {
		return 1
	}
	return 0
}

func longestMatch(s string) int {
	r, _ := runeAt(s, 0)
	c, f := props(r)
	n := 0
	if isCore(c) || c == wbExtendNumLet {
		n = wordLen(s)
	}
	switch {
	case f&(fEmoji|fEmojiBase|fEmojiMod) != 0 || c == wbRegional || r == zwj:
		n = max(n, emojiLen(s))
	case r == '#' || r == '*' || '0' <= r && r <= '9': // of the emoji rules, only a keycap starts so
		n = max(n, keycapLen(s))
	}
	if f&fComplex != 0 {
		n = max(n, complexLen(s))
	}
	if f&(fHan|fHiragana) != 0 {
		_, _, end := unit(s, 0)
		n = max(n, end)
	}
	return n
}

func isCore(c wordClass) bool {
	return c == wbLetter || c == wbHebrew || c == wbNumeric || c == wbKatakana
}

// adjacent reports whether a word whose last core unit is of class last goes on with a core
// unit of class next with nothing between (WB5, WB8-WB10, WB13).
func adjacent(last, next wordClass) bool {
	return (last == wbKatakana) == (next == wbKatakana)
}

// bridges reports whether one unit of class mid between core units of classes last and next
// keeps them in one word (WB6/WB7 for letters, WB7b/WB7c for Hebrew, WB11/WB12 for digits).
func bridges(last, mid, next wordClass) bool {
	letter := func(c wordClass) bool { return c == wbLetter || c == wbHebrew }
	switch {
	case letter(last) && letter(next) && (mid == wbMidLetter || mid == wbMidNumLet || mid == wbSingleQuote):
		return true
	case last == wbNumeric && next == wbNumeric:
		return mid == wbMidNum || mid == wbMidNumLet || mid == wbSingleQuote
	}
	return last == wbHebrew && next == wbHebrew && mid == wbDoubleQuote
}

// wordLen is the longest match at s of the grammar's NUM and ALPHANUM rules: connector
// punctuation, then core units (letters, digits, Katakana) joined by the rules above or by
// runs of connector punctuation, then connector punctuation. 0 when s starts no word.
func wordLen(s string) int {
	c, _, end := unit(s, 0)
	for c == wbExtendNumLet {
		c, _, end = unit(s, end)
	}
	if !isCore(c) {
		return 0
	}
	last, accept := c, end
	for accept < len(s) {
		c, _, end := unit(s, accept)
		switch {
		case isCore(c) && adjacent(last, c):
			last, accept = c, end
		case c == wbExtendNumLet: // WB13a/b: after a run of them, any core unit goes on
			for c == wbExtendNumLet {
				accept = end
				c, _, end = unit(s, end)
			}
			if !isCore(c) {
				return accept
			}
			last, accept = c, end
		case c >= wbMidLetter && c <= wbDoubleQuote:
			next, _, nend := unit(s, end)
			switch {
			case isCore(next) && bridges(last, c, next):
				last, accept = next, nend
			case last == wbHebrew && c == wbSingleQuote: // WB7a: a Hebrew word may end in '
				last, accept = wbHebrewQuote, end
			default:
				return accept
			}
		default:
			return accept
		}
	}
	return accept
}

// complexLen is the length of the run of South-East Asian units at s.
func complexLen(s string) int {
	n := 0
	for {
		r, size := runeAt(s, n)
		if _, f := props(r); size == 0 || f&fComplex == 0 {
			return n
		}
		n = extendEnd(s, n+size, false)
	}
}
