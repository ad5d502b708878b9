package wordpiece

import (
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
	"golang.org/x/text/unicode/rangetable"
)

// HF tokenizers does not use one Unicode version. Its BertNormalizer and BertPreTokenizer
// take general categories from the Rust crate unicode_categories (Unicode 8.0 tables) and
// NFD from unicode-normalization-alignments (Unicode 9.0 tables), while whitespace and
// lowercasing come from Rust's std (current Unicode, like Go's). A character assigned
// later than a table's version is, for that table, in no category and decomposes to
// itself with combining class 0. Go ships Unicode 15.0 tables, so this file rebuilds the
// older views from them with golang.org/x/text/unicode/rangetable's per-version
// assigned sets. TestCodepointsMatchHF checks every code point against HF.

const (
	categoriesVersion = "8.0.0" // unicode_categories, used for Mn, Cf and P*
	nfdVersion        = "9.0.0" // unicode-normalization-alignments
)

// categoryChanges lists the code points whose general category changed between Unicode
// 8.0 and Go's version, for the categories used here.
var categoryChanges = []struct {
	r       rune
	table   string // its category in Unicode 8.0 among "Mn", "Cf", "P", or ""
	comment string
}{
	{0x166D, "P", "CANADIAN SYLLABICS CHI SIGN: Po in 8.0, now So"},
	{0x1734, "Mn", "HANUNOO SIGN PAMUDPOD: Mn in 8.0, now Mc"},
	{0x1885, "", "MONGOLIAN LETTER ALI GALI BALUDA: Lo in 8.0, now Mn"},
	{0x1886, "", "MONGOLIAN LETTER ALI GALI THREE BALUDA: Lo in 8.0, now Mn"},
	{0xA9BD, "", "JAVANESE CONSONANT SIGN KERET: Mc in 8.0, now Mn"},
	{0x111C9, "P", "SHARADA SANDHI MARK: Po in 8.0, now Mn"},
}

// runeClass is a set of flags saying what the BERT rules do with one rune.
type runeClass uint8

const (
	classControl  runeClass = 1 << iota // dropped by clean_text: NUL, U+FFFD, Cc Cf Co Cs (not \t \n \r)
	classSpace                          // White_Space: ' ' after clean_text, splits words
	classPunct                          // a pre-token of its own
	classMark                           // Mn: dropped by strip_accents
	classCJK                            // spaced by handle_chinese_chars
	classNewerNFD                       // an NFD starter to HF, though not to Go (see newerThanNFD)
)

// unicodeTables are the category and NFD views of HF's Unicode versions. Built once, on
// first Load, then read-only.
type unicodeTables struct {
	// format is Cf as of Unicode 8.0 (clean_text drops it with Cc, Co and Cs, which have
	// not changed since).
	format *unicode.RangeTable
	// punctuation is P (Pc Pd Ps Pe Pi Pf Po) as of Unicode 8.0.
	punctuation *unicode.RangeTable
	// nonspacingMark is Mn as of Unicode 8.0.
	nonspacingMark *unicode.RangeTable
	// newerThanNFD are the characters that Go's NFD decomposes or reorders (combining
	// class != 0) but that were unassigned in Unicode 9.0: HF's NFD leaves them alone
	// and treats them as starters.
	newerThanNFD *unicode.RangeTable
	// bmp caches classify for the Basic Multilingual Plane (64 KiB): a table lookup
	// instead of several binary searches per rune.
	bmp [0x10000]runeClass
}

var hfUnicode = sync.OnceValue(func() *unicodeTables {
	old := rangetable.Assigned(nfdVersion)
	var runes []rune
	var buf [utf8.UTFMax]byte
	rangetable.Visit(rangetable.Assigned(unicode.Version), func(r rune) {
		p := norm.NFD.Properties(utf8.AppendRune(buf[:0], r))
		if (p.CCC() != 0 || p.Decomposition() != nil) && !unicode.Is(old, r) {
			runes = append(runes, r)
		}
	})
	u := &unicodeTables{
		format:         categoryAsOf("Cf", unicode.Cf),
		punctuation:    categoryAsOf("P", unicode.P),
		nonspacingMark: categoryAsOf("Mn", unicode.Mn),
		newerThanNFD:   rangetable.New(runes...),
	}
	for r := range u.bmp {
		u.bmp[r] = u.classify(rune(r))
	}
	return u
})

// class returns the flags of r.
func (u *unicodeTables) class(r rune) runeClass {
	if r < rune(len(u.bmp)) {
		return u.bmp[r]
	}
	return u.classify(r)
}

func (u *unicodeTables) classify(r rune) runeClass {
	var c runeClass
	switch {
	case r == '\t' || r == '\n' || r == '\r':
		// bert.rs counts these as whitespace, not control.
	case r == 0 || r == utf8.RuneError || unicode.In(r, unicode.Cc, unicode.Co, unicode.Cs) || unicode.Is(u.format, r):
		c |= classControl
	}
	if unicode.IsSpace(r) { // White_Space, as Rust's char::is_whitespace
		c |= classSpace
	}
	// ASCII punctuation (Rust's char::is_ascii_punctuation) includes the symbols
	// $ + < = > ^ ` | ~ that Unicode files under S.
	if unicode.Is(u.punctuation, r) || strings.ContainsRune("$+<=>^`|~", r) {
		c |= classPunct
	}
	if unicode.Is(u.nonspacingMark, r) {
		c |= classMark
	}
	if isChineseChar(r) {
		c |= classCJK
	}
	if unicode.Is(u.newerThanNFD, r) {
		c |= classNewerNFD
	}
	return c
}

// categoryAsOf returns the runes of cur (Go's table for category name) that were
// assigned in categoriesVersion, corrected by categoryChanges.
func categoryAsOf(name string, cur *unicode.RangeTable) *unicode.RangeTable {
	old := rangetable.Assigned(categoriesVersion)
	var runes []rune
	rangetable.Visit(cur, func(r rune) {
		if unicode.Is(old, r) {
			runes = append(runes, r)
		}
	})
	for _, c := range categoryChanges {
		if c.table == name {
			runes = append(runes, c.r)
		} else {
			runes = slices.DeleteFunc(runes, func(r rune) bool { return r == c.r })
		}
	}
	return rangetable.New(runes...)
}
