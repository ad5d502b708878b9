package bm25

// stem applies Porter's stemming algorithm as Lucene's PorterStemmer does (the version
// with Porter's later departures: "bli" -> "ble", "logi" -> "log"; words of one or two
// characters are left alone). It works on the term's UTF-16 code units (uint16) or, for an
// ASCII term, its bytes: Java strings are UTF-16, and every non-ASCII unit is a consonant
// to the algorithm. b is rewritten in place; the stem is the returned prefix of b.
func stem[T byte | uint16](b []T) []T {
	if len(b) <= 2 {
		return b
	}
	s := porter[T]{b: b, k: len(b) - 1}
	s.step1()
	s.step2()
	s.step3()
	s.step4()
	s.step5()
	s.step6()
	return s.b[:s.k+1]
}

// porter is the stemmer's state over one word: b[0..k] is the word so far, j the end of
// the stem a matched suffix leaves (set by ends).
type porter[T byte | uint16] struct {
	b    []T
	j, k int
}

// cons reports whether b[i] is a consonant: not a, e, i, o, u, and y only after a vowel
// or at the start.
func (s *porter[T]) cons(i int) bool {
	switch s.b[i] {
	case 'a', 'e', 'i', 'o', 'u':
		return false
	case 'y':
		return i == 0 || !s.cons(i-1)
	}
	return true
}

// m counts the vowel-consonant sequences of b[0..j] ([C](VC)^m[V]).
func (s *porter[T]) m() int {
	n, i := 0, 0
	for ; i <= s.j && s.cons(i); i++ {
	}
	for i <= s.j {
		for ; i <= s.j && !s.cons(i); i++ {
		}
		if i > s.j {
			break
		}
		n++
		for ; i <= s.j && s.cons(i); i++ {
		}
	}
	return n
}

// vowelInStem reports whether b[0..j] holds a vowel.
func (s *porter[T]) vowelInStem() bool {
	for i := 0; i <= s.j; i++ {
		if !s.cons(i) {
			return true
		}
	}
	return false
}

// doubleC reports whether b[i-1..i] is a double consonant.
func (s *porter[T]) doubleC(i int) bool {
	return i >= 1 && s.b[i] == s.b[i-1] && s.cons(i)
}

// cvc reports whether b[i-2..i] is consonant-vowel-consonant with the last not w, x or y
// (the short syllables of hop(e), cav(e), but not snow, box, tray).
func (s *porter[T]) cvc(i int) bool {
	if i < 2 || !s.cons(i) || s.cons(i-1) || !s.cons(i-2) {
		return false
	}
	c := s.b[i]
	return c != 'w' && c != 'x' && c != 'y'
}

// ends reports whether b[0..k] ends with suffix, and sets j to the end of the rest.
func (s *porter[T]) ends(suffix string) bool {
	n := len(suffix)
	if n > s.k+1 {
		return false
	}
	o := s.k - n + 1
	for i := 0; i < n; i++ {
		if s.b[o+i] != T(suffix[i]) {
			return false
		}
	}
	s.j = s.k - n
	return true
}

// setTo replaces b[j+1..k] by repl.
func (s *porter[T]) setTo(repl string) {
	s.b = s.b[:s.j+1]
	for i := 0; i < len(repl); i++ {
		s.b = append(s.b, T(repl[i]))
	}
	s.k = len(s.b) - 1
}

// r replaces the matched suffix by repl when the stem has m() > 0.
func (s *porter[T]) r(repl string) {
	if s.m() > 0 {
		s.setTo(repl)
	}
}

// step1 removes plurals and -ed or -ing (caresses -> caress, ponies -> poni, meeting -> meet,
// hopping -> hop, filing -> file).
func (s *porter[T]) step1() {
	if s.b[s.k] == 's' {
		switch {
		case s.ends("sses"):
			s.k -= 2
		case s.ends("ies"):
			s.setTo("i")
		case s.b[s.k-1] != 's':
			s.k--
		}
	}
	if s.ends("eed") {
		if s.m() > 0 {
			s.k--
		}
	} else if (s.ends("ed") || s.ends("ing")) && s.vowelInStem() {
		s.k = s.j
		switch {
		case s.ends("at"):
			s.setTo("ate")
		case s.ends("bl"):
			s.setTo("ble")
		case s.ends("iz"):
			s.setTo("ize")
		case s.doubleC(s.k):
			if c := s.b[s.k]; c != 'l' && c != 's' && c != 'z' {
				s.k--
			}
		default:
			s.j = s.k
			if s.m() == 1 && s.cvc(s.k) {
				s.setTo("e")
			}
		}
	}
	s.b = s.b[:s.k+1]
}

// step2 turns a terminal y into i when the stem has a vowel.
func (s *porter[T]) step2() {
	if s.ends("y") && s.vowelInStem() {
		s.b[s.k] = 'i'
	}
}

// suffixRule is one "suffix -> replacement" of steps 3 to 5, tried in order.
type suffixRule struct{ suffix, repl string }

// step3Rules map double suffixes to single ones (step 3 of Lucene, step 2 of the paper),
// keyed by the suffix's last but one letter as in the reference implementation.
var step3Rules = [128][]suffixRule{
	'a': {{"ational", "ate"}, {"tional", "tion"}},
	'c': {{"enci", "ence"}, {"anci", "ance"}},
	'e': {{"izer", "ize"}},
	'l': {{"bli", "ble"}, {"alli", "al"}, {"entli", "ent"}, {"eli", "e"}, {"ousli", "ous"}},
	'o': {{"ization", "ize"}, {"ation", "ate"}, {"ator", "ate"}},
	's': {{"alism", "al"}, {"iveness", "ive"}, {"fulness", "ful"}, {"ousness", "ous"}},
	't': {{"aliti", "al"}, {"iviti", "ive"}, {"biliti", "ble"}},
	'g': {{"logi", "log"}},
}

// step4Rules handle -ic-, -full, -ness (keyed by the last letter).
var step4Rules = [128][]suffixRule{
	'e': {{"icate", "ic"}, {"ative", ""}, {"alize", "al"}},
	'i': {{"iciti", "ic"}},
	'l': {{"ical", "ic"}, {"ful", ""}},
	's': {{"ness", ""}},
}

// applyRules replaces the first rule's suffix that b ends with (if m() > 0); later rules
// are not tried once one suffix matched, as in the reference's switch.
func (s *porter[T]) applyRules(rules []suffixRule) {
	for _, rule := range rules {
		if s.ends(rule.suffix) {
			s.r(rule.repl)
			return
		}
	}
}

func (s *porter[T]) step3() {
	if s.k == 0 || s.b[s.k-1] > 0x7f {
		return
	}
	s.applyRules(step3Rules[byte(s.b[s.k-1])])
	s.b = s.b[:s.k+1]
}

func (s *porter[T]) step4() {
	if s.b[s.k] > 0x7f {
		return
	}
	s.applyRules(step4Rules[byte(s.b[s.k])])
	s.b = s.b[:s.k+1]
}

// step5Suffixes are removed in a context <c>vcvc<v> (m() > 1), keyed by the last but one letter.
var step5Suffixes = [128][]string{
	'a': {"al"}, 'c': {"ance", "ence"}, 'e': {"er"}, 'i': {"ic"}, 'l': {"able", "ible"},
	'n': {"ant", "ement", "ment", "ent"}, 'o': {"ion", "ou"}, 's': {"ism"}, 't': {"ate", "iti"},
	'u': {"ous"}, 'v': {"ive"}, 'z': {"ize"},
}

func (s *porter[T]) step5() {
	if s.k == 0 || s.b[s.k-1] > 0x7f {
		return
	}
	matched := false
	for _, suf := range step5Suffixes[byte(s.b[s.k-1])] {
		if !s.ends(suf) {
			continue
		}
		// -ion goes only after s or t.
		if suf == "ion" && !(s.j >= 0 && (s.b[s.j] == 's' || s.b[s.j] == 't')) {
			continue
		}
		matched = true
		break
	}
	if matched && s.m() > 1 {
		s.k = s.j
	}
	s.b = s.b[:s.k+1]
}

// step6 removes a final -e (if m() > 1, or m() == 1 and not after a short syllable) and
// turns -ll into -l when m() > 1.
func (s *porter[T]) step6() {
	s.j = s.k
	if s.b[s.k] == 'e' {
		if a := s.m(); a > 1 || a == 1 && !s.cvc(s.k-1) {
			s.k--
		}
	}
	if s.b[s.k] == 'l' && s.doubleC(s.k) && s.m() > 1 {
		s.k--
	}
	s.b = s.b[:s.k+1]
}
