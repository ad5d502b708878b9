package wordpiece

import (
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

// isWhitespace is Rust's char::is_whitespace (the White_Space property), as both
// bert.rs (plus \t \n \r, already in it) and the BertPreTokenizer use it.
func isWhitespace(r rune) bool { return unicode.IsSpace(r) }

// isControl is bert.rs is_control: the "Other" categories Cc, Cf, Co, Cs (not Cn,
// so unassigned code points survive) except \t \n \r, which count as whitespace.
func (n *normalizer) isControl(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Co, unicode.Cs) || unicode.Is(n.unicode.format, r)
}

// isPunctuation is the BertPreTokenizer's split rule: ASCII punctuation (which includes
// the symbols $ + < = > ^ ` | ~) or any Unicode punctuation category (Pc Pd Ps Pe Pi Pf Po).
func (n *normalizer) isPunctuation(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiClasses[r] == asciiPunct
	}
	return unicode.Is(n.unicode.punctuation, r)
}

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

// scratch is the per-call working memory of one Encode; pooled, owned by one goroutine.
type scratch struct {
	clean, nfd, out []byte
}

// normalize appends the normalized form of s to s.out (reset first) and returns it.
// Invalid UTF-8 decodes to U+FFFD, which clean_text drops.
func (n *normalizer) normalize(sc *scratch, s string) []byte {
	if isASCII(s) {
		sc.out = n.normalizeASCII(sc.out[:0], s)
		return sc.out
	}
	// Clean text and CJK spacing are per-character rules.
	clean := sc.clean[:0]
	newerThanNFD := false // does clean hold a rune HF's NFD does not know?
	for _, r := range s {
		if r >= utf8.RuneSelf && unicode.Is(n.unicode.newerThanNFD, r) {
			newerThanNFD = true
		}
		switch {
		case n.cleanText && (r == 0 || r == utf8.RuneError || n.isControl(r)):
			continue
		case n.cleanText && isWhitespace(r):
			clean = append(clean, ' ')
		case n.chineseChars && isChineseChar(r):
			clean = append(clean, ' ')
			clean = utf8.AppendRune(clean, r)
			clean = append(clean, ' ')
		default:
			clean = utf8.AppendRune(clean, r)
		}
	}
	sc.clean = clean
	text := clean
	if n.stripAccents {
		sc.nfd = n.appendNFD(sc.nfd[:0], clean, newerThanNFD)
		text = sc.nfd
	}
	out := sc.out[:0]
	for i := 0; i < len(text); {
		r, size := rune(text[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRune(text[i:])
		}
		i += size
		switch {
		case n.stripAccents && unicode.Is(n.unicode.nonspacingMark, r):
		case n.lowercase:
			out = appendLower(out, r)
		default:
			out = utf8.AppendRune(out, r)
		}
	}
	sc.out = out
	return out
}

// appendNFD appends the NFD of s as HF's Unicode 9.0 tables compute it: runes newer
// than that are starters that decompose to themselves, so the text is normalized in
// segments between them. hasNewer says whether s holds such runes at all.
func (n *normalizer) appendNFD(dst, s []byte, hasNewer bool) []byte {
	if !hasNewer {
		return norm.NFD.Append(dst, s...)
	}
	for len(s) > 0 {
		end := 0
		var r rune
		size := 0
		for end < len(s) {
			r, size = utf8.DecodeRune(s[end:])
			if r >= utf8.RuneSelf && unicode.Is(n.unicode.newerThanNFD, r) {
				break
			}
			end += size
		}
		dst = norm.NFD.Append(dst, s[:end]...)
		if end < len(s) {
			dst = append(dst, s[end:end+size]...)
			end += size
		}
		s = s[end:]
	}
	return dst
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
