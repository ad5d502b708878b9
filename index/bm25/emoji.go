package bm25

// emojiLen is the longest match at s of StandardTokenizer's EMOJI rule (UTS #51 emoji
// sequences as Lucene 9's grammar writes them), 0 if none:
//
//	core (ZWJ core)*               core = ZWJ* EmojiChar X* FE0F? | (ZWJ* ModifierBase X*)? Modifier X*
//	[0-9#*] X* FE0F? 20E3 X*       (keycap)
//	RI Ext* RI Ext*                (flag)
//
// X is Extend, Format or ZWJ but not a presentation selector. Lucene's other branch, core
// followed by emoji tag characters, is covered by X*: tags are Extend in Unicode 12.1.
func emojiLen(s string) int {
	best := max(keycapLen(s), flagLen(s))
	// Every end of a core is a place where a ZWJ may start the next core; seen keeps a run of
	// joiners from expanding the same end twice.
	var seenBuf [maxWindowBytes + 1]bool // s is a window: at most maxWindowBytes
	seen := seenBuf[:len(s)+1]
	ends := coreEnds(s, 0, nil)
	for k := 0; k < len(ends); k++ {
		e := ends[k]
		if seen[e] {
			continue
		}
		seen[e] = true
		best = max(best, e)
		if r, n := runeAt(s, e); r == zwj {
			ends = coreEnds(s, e+n, ends)
		}
	}
	return best
}

// coreEnds appends to ends every end of an emoji core (a character, presentation or modifier
// sequence) that starts at s[i:].
func coreEnds(s string, i int, ends []int) []int {
	j := i
	for r, n := runeAt(s, j); r == zwj; r, n = runeAt(s, j) {
		j += n
	}
	r, n := runeAt(s, j)
	_, f := props(r)
	if n > 0 && f&fEmoji != 0 {
		x := extendEnd(s, j+n, true)
		ends = appendEvery(ends, s, j+n, x)
		if r, n := runeAt(s, x); r == presentationSel {
			ends = append(ends, x+n)
		}
	}
	if n > 0 && f&fEmojiBase != 0 {
		x := extendEnd(s, j+n, true)
		if m, mn := runeAt(s, x); mn > 0 && isModifier(m) {
			ends = appendEvery(ends, s, x+mn, extendEnd(s, x+mn, true))
		}
	}
	if j == i && n > 0 && f&fEmojiMod != 0 {
		ends = appendEvery(ends, s, i+n, extendEnd(s, i+n, true))
	}
	return ends
}

// appendEvery appends every rune boundary of s[from:to], both ends included.
func appendEvery(ends []int, s string, from, to int) []int {
	for i := from; ; {
		ends = append(ends, i)
		if i >= to {
			return ends
		}
		_, n := runeAt(s, i)
		i += n
	}
}

func isModifier(r rune) bool {
	_, f := props(r)
	return f&fEmojiMod != 0
}

// keycapLen matches [0-9#*] X* FE0F? 20E3 X*.
func keycapLen(s string) int {
	if len(s) == 0 || !('0' <= s[0] && s[0] <= '9' || s[0] == '#' || s[0] == '*') {
		return 0
	}
	x := extendEnd(s, 1, true)
	best := 0
	for i := 1; i < x; {
		r, n := runeAt(s, i)
		if i += n; r == keycap {
			best = x // 20E3 is itself Extend: the run goes on past it
		}
	}
	if r, n := runeAt(s, x); r == presentationSel {
		if k, kn := runeAt(s, x+n); k == keycap {
			best = extendEnd(s, x+n+kn, true)
		}
	}
	return best
}

// flagLen matches two regional indicators, each with its Extend runes.
func flagLen(s string) int {
	c, _, end := unit(s, 0)
	if c != wbRegional {
		return 0
	}
	if c, _, end = unit(s, end); c != wbRegional {
		return 0
	}
	return end
}
