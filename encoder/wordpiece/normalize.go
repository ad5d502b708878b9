package wordpiece

import (
	"slices"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normalizer holds the BertNormalizer flags of HF tokenizers (normalizers/bert.rs).
// The rules are applied in HF's order: clean text, CJK spacing, NFD + strip Mn, lowercase.
type normalizer struct {
	cleanText    bool // drop NUL, U+FFFD and control/format chars; whitespace -> ' '
	chineseChars bool // surround CJK ideographs with spaces
	stripAccents bool // NFD, then drop nonspacing marks (Mn)
	lowercase    bool // Rust char::to_lowercase (may expand, e.g. U+0130)
	unicode      *unicodeTables
}

// asciiClass is what the pre-tokenizer does with one ASCII byte (its fast path).
type asciiClass uint8

const (
	asciiWord  asciiClass = iota // part of a word
	asciiSpace                   // White_Space (\t \n \v \f \r ' '): splits, dropped
	asciiPunct                   // Rust char::is_ascii_punctuation: its own token
)

var asciiClasses = func() (t [utf8.RuneSelf]asciiClass) {
	for b := 0; b < utf8.RuneSelf; b++ {
		switch {
		case b >= '\t' && b <= '\r' || b == ' ':
			t[b] = asciiSpace
		case b >= '!' && b <= '/', b >= ':' && b <= '@', b >= '[' && b <= '`', b >= '{' && b <= '~':
			t[b] = asciiPunct
		}
	}
	return t
}()

// isChineseChar is bert.rs is_chinese_char: the CJK Unified Ideographs blocks.
func isChineseChar(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) ||
		(r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) ||
		(r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) ||
		(r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) ||
		(r >= 0x2F800 && r <= 0x2FA1F)
}

// appendLower appends Rust's char::to_lowercase(r): the simple lowercase mapping plus
// SpecialCasing's one unconditional expansion, U+0130 -> "i\u0307".
func appendLower(dst []byte, r rune) []byte {
	if r == 'İ' {
		return append(dst, 'i', 0xCC, 0x87)
	}
	return utf8.AppendRune(dst, unicode.ToLower(r))
}

// scratch is the working memory of one Encode call; pooled, owned by one goroutine.
type scratch struct {
	clean, nfd, out []byte
	decomposed      []decomposedRune
	addedAt         []int // see Tokenizer.nextAdded
}

// normalize returns the normalized form of s in sc.out (valid until the next call).
// Invalid UTF-8 decodes to U+FFFD, which clean_text drops.
func (n *normalizer) normalize(sc *scratch, s string) []byte {
	if isASCII(s) {
		sc.out = n.normalizeASCII(sc.out[:0], s)
		return sc.out
	}
	// Clean text and CJK spacing are per-character rules.
	clean := sc.clean[:0]
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		c := n.unicode.class(r)
		switch {
		case n.cleanText && c&classControl != 0:
		case n.cleanText && c&classSpace != 0:
			clean = append(clean, ' ')
		case n.chineseChars && c&classCJK != 0:
			clean = append(clean, ' ')
			clean = append(clean, s[i:i+size]...)
			clean = append(clean, ' ')
		default:
			clean = utf8.AppendRune(clean, r) // not s[i:i+size]: invalid bytes become U+FFFD
		}
		i += size
	}
	sc.clean = clean
	text := clean
	if n.stripAccents {
		sc.nfd = sc.appendNFD(sc.nfd[:0], clean, n.unicode)
		text = sc.nfd
	}
	if !n.stripAccents && !n.lowercase {
		return text
	}
	out := sc.out[:0]
	for i := 0; i < len(text); {
		r, size := rune(text[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRune(text[i:])
		}
		switch {
		case n.stripAccents && n.unicode.class(r)&classMark != 0:
		case n.lowercase:
			out = appendLower(out, r)
		default:
			out = append(out, text[i:i+size]...)
		}
		i += size
	}
	sc.out = out
	return out
}

// decomposedRune is one rune of an NFD result with its canonical combining class.
type decomposedRune struct {
	r   rune
	ccc uint8
}

// appendNFD appends the canonical decomposition (NFD, UAX #15) of s as HF's Unicode 9.0
// tables compute it: a rune newer than that decomposes to itself with combining class 0.
// It is written here rather than with norm.Form because norm applies the Stream-Safe
// Text Format (a U+034F after 30 combining marks), which HF does not, and because
// norm.Form.Append allocates.
func (sc *scratch) appendNFD(dst, s []byte, u *unicodeTables) []byte {
	d := sc.decomposed[:0]
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRune(s[i:])
		}
		d = appendDecomposed(d, s[i:i+size], r, u)
		i += size
	}
	// Canonical ordering: each run of combining marks (ccc != 0), stably by ccc.
	for start := 0; start < len(d); {
		if d[start].ccc == 0 {
			start++
			continue
		}
		end := start + 1
		for end < len(d) && d[end].ccc != 0 {
			end++
		}
		if end-start > 1 {
			slices.SortStableFunc(d[start:end], func(a, b decomposedRune) int { return int(a.ccc) - int(b.ccc) })
		}
		start = end
	}
	for _, x := range d {
		dst = utf8.AppendRune(dst, x.r)
	}
	sc.decomposed = d
	return dst
}

// Hangul syllables decompose algorithmically (Unicode 3.12).
const (
	hangulBase  = 0xAC00
	hangulCount = 11172
	hangulL     = 0x1100
	hangulV     = 0x1161
	hangulT     = 0x11A7
	hangulTs    = 28      // trailing consonants per vowel, including none
	hangulVTs   = 21 * 28 // syllables per leading consonant
)

// appendDecomposed appends the full canonical decomposition of r, whose UTF-8 bytes are b.
func appendDecomposed(d []decomposedRune, b []byte, r rune, u *unicodeTables) []decomposedRune {
	switch {
	case r < utf8.RuneSelf || u.class(r)&classNewerNFD != 0:
		return append(d, decomposedRune{r: r})
	case r >= hangulBase && r < hangulBase+hangulCount:
		s := r - hangulBase
		d = append(d, decomposedRune{r: hangulL + s/hangulVTs}, decomposedRune{r: hangulV + s%hangulVTs/hangulTs})
		if t := s % hangulTs; t != 0 {
			d = append(d, decomposedRune{r: hangulT + t})
		}
		return d
	}
	p := norm.NFD.Properties(b)
	dec := p.Decomposition()
	if dec == nil {
		return append(d, decomposedRune{r: r, ccc: p.CCC()})
	}
	for len(dec) > 0 {
		x, n := utf8.DecodeRune(dec)
		d = append(d, decomposedRune{r: x, ccc: norm.NFD.Properties(dec[:n]).CCC()})
		dec = dec[n:]
	}
	return d
}

// normalizeASCII is normalize for pure ASCII input: NFD and accent stripping are no-ops.
func (n *normalizer) normalizeASCII(out []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		b := s[i]
		if n.cleanText {
			switch {
			case b == '\t' || b == '\n' || b == '\r':
				b = ' '
			case b < 0x20 || b == 0x7f: // the other C0 controls and DEL
				continue
			}
		}
		if n.lowercase && b >= 'A' && b <= 'Z' {
			b += 'a' - 'A'
		}
		out = append(out, b)
	}
	return out
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
