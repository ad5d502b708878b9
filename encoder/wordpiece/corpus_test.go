package wordpiece

import (
	"bufio"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// curated are hand-picked edge cases of the BERT tokenization rules.
var curated = []string{
	"", " ", "   ", "\t\n\r", "a", "A", "hello world", "Hello, World!", "HELLO WORLD",
	"don't stop", "e-mail: john.doe@example.com", "https://en.wikipedia.org/wiki/Foo_(bar)?x=1&y=2",
	"$100 + 20% = <tag> ^caret^ `tick` |pipe| ~tilde~ #hash @at _under_",
	"3.14159 1,000,000 1e-10 -42 +7 0x1F 2024-01-01 12:30:45",
	"query: who wrote the origin of species?", "passage: \"Charles Darwin\"\nCharles Robert Darwin was...",
	// accents and combining marks
	"café naïve résumé Ångström Øresund Straße façade", "Cafe\u0301 (combining acute)", "e\u0301\u0300\u0316 stacked marks",
	"ÀÁÂÃÄÅàáâãäå ÇçÑñ", "Ǆemal ǅemal ǆemal", "İstanbul ıi İI", "ΣΊΣΥΦΟΣ σίσυφος ς", "ﬁﬂ ligatures ﬀ", "Å Å Å",
	"\u0345 ypogegrammeni", "a" + strings.Repeat("\u0301\u0316", 20) + "b",
	"a" + strings.Repeat("\u08d4\U00011442", 20) + "b (over 30 marks: no Stream-Safe U+034F)", "\U000111c9\u1734\u1885 changed categories", "\u0344 combining greek dialytika tonos", "\u1e9e capital sharp s",
	// CJK, Japanese, Korean
	"中文测试", "我爱北京天安门。", "日本語のテキスト、カタカナ、ひらがな", "한국어 텍스트 입니다", "漢字かな交じり文",
	"\U00020000\U0002A6DF\U0002B740 ext ideographs", "\uF900\uFAFF compat", "\u3000ideographic space", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３",
	// other scripts
	"Привет, мир! Ёлка", "Γειά σου Κόσμε", "مرحبا بالعالم، كيف حالك؟", "שָׁלוֹם עוֹלָם", "नमस्ते दुनिया। हिन्दी",
	"สวัสดีชาวโลก", "Բարեւ աշխարհ", "გამარჯობა", "ሰላም ልዑል", "ᚠᚢᚦᚨᚱᚲ", "𓀀𓀁 hieroglyphs", "ꦗꦮ ꦧꦺꦴꦱ",
	// emoji and symbols
	"I ❤️ NY 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇫🇷", "★☆♠♣♥♦ ©®™ °±×÷ €£¥₹", "→←↑↓ ∀∃∈∉ ∑∏√∞", "🤣🥰🫠 newer emoji",
	// control, format and zero-width characters
	"a\x00b\x01c\x7fd", "zero\u200bwidth\u200cjoin\u200dnon\u2060joiner", "\ufeffBOM at start", "soft\u00adhyphen",
	"bidi \u202eoverride\u202c \u2066iso\u2069", "replacement \ufffd char", "nel\u0085line", "tab\u000bvt\u000cff",
	"\u0600\u061c arabic format", "\U000E0041\U000E007F tags", "private \ue000\U000F0000\U00100000 use",
	"unassigned \u0378\U0003FFFF\U000EFFFF", "\U0010FFFF max",
	// whitespace runs including Unicode spaces
	"a  b\t\tc\n\nd", "\u00a0nbsp\u2000en\u2003em\u2009thin\u202fnarrow\u205fmath\u3000ideo", "line\u2028sep\u2029para", "\u1680ogham\u180emongolian",
	// punctuation
	"«quoted» „low“ ‘single’ ¿qué? ¡sí!", "—em–en‐hyphen…ellipsis", "【bracket】「corner」『white』", "※†‡§¶•‰′″",
	"end.", "(parenthetical)", "a/b\\c", "!!!???...", "..", "'", "\"",
	// special tokens in raw text (matched before normalization)
	"[CLS]", "[SEP]", "[MASK] is masked", "a[UNK]b", "[PAD][PAD]", "[cls] lower", "[CLS", "CLS]", "[[SEP]]", "x[SEP]y[CLS]z",
	strings.Repeat("[MASK] a[SEP]b[CLS", 200), "[SEP" + strings.Repeat("[UNK]", 300),
	// long words and long texts
	strings.Repeat("a", 100), strings.Repeat("a", 101), strings.Repeat("é", 101), strings.Repeat("ab", 60) + " tail",
	strings.Repeat("pneumonoultramicroscopicsilicovolcanoconiosis ", 20), strings.Repeat("word ", 300),
	strings.Repeat("中", 300), strings.Repeat("unbelievably ", 130),
	// longer than a normalization chunk (4096 bytes), with and without spaces near the cuts
	strings.Repeat("Ångström café 中文 e\u0301\u0316 ", 700), strings.Repeat("x", 5000) + " y" + strings.Repeat("é", 3000),
	strings.Repeat("a", 4095) + " \u0301\u0316b " + strings.Repeat("İ", 3000), strings.Repeat("\u3000", 5000) + "end",
}

// randomCorpus returns n seeded strings: random Unicode over all planes (assigned or
// not, surrogates excluded), runs drawn from interesting ranges, and texts built from
// real vocabulary pieces so that WordPiece matching (not just [UNK]) is exercised.
func randomCorpus(n int, vocab []string) []string {
	rng := rand.New(rand.NewPCG(1, 2))
	ranges := [][2]rune{
		{0x20, 0x7e}, {0x20, 0x7e}, {0x20, 0x7e}, {0x00, 0x20}, {0x80, 0x24f}, {0x300, 0x36f},
		{0x370, 0x52f}, {0x590, 0x6ff}, {0x900, 0xdff}, {0xe00, 0xeff}, {0x1100, 0x11ff},
		{0x1e00, 0x1fff}, {0x2000, 0x206f}, {0x2070, 0x2bff}, {0x2e00, 0x2e7f}, {0x3000, 0x30ff},
		{0x3400, 0x4dbf}, {0x4e00, 0x9fff}, {0xac00, 0xd7a3}, {0xf900, 0xfaff}, {0xfe00, 0xffff},
		{0x10000, 0x1ffff}, {0x1f300, 0x1faff}, {0x20000, 0x3ffff}, {0xe0000, 0xe01ef}, {0, 0x10ffff},
	}
	randRune := func() rune {
		for {
			rg := ranges[rng.IntN(len(ranges))]
			r := rg[0] + rng.Int32N(rg[1]-rg[0]+1)
			if utf8.ValidRune(r) {
				return r
			}
		}
	}
	out := make([]string, 0, n)
	var b strings.Builder
	for len(out) < n {
		b.Reset()
		switch rng.IntN(4) {
		case 0, 1: // random code points, sometimes a long run
			m := rng.IntN(40)
			if rng.IntN(20) == 0 {
				m = 100 + rng.IntN(400)
			}
			for range m {
				b.WriteRune(randRune())
			}
		case 2: // vocabulary pieces, some glued, with random case, spaces and accents
			for range 1 + rng.IntN(30) {
				w := strings.TrimPrefix(vocab[rng.IntN(len(vocab))], "##")
				if rng.IntN(3) == 0 {
					w = strings.ToUpper(w)
				}
				b.WriteString(w)
				switch rng.IntN(6) {
				case 0:
				case 1:
					b.WriteRune(randRune())
				default:
					b.WriteByte(' ')
				}
			}
		case 3: // one long word around the 100-char limit
			w := vocab[rng.IntN(len(vocab))]
			for utf8.RuneCountInString(b.String()) < 95+rng.IntN(10) {
				b.WriteString(strings.TrimPrefix(w, "##"))
			}
		}
		out = append(out, b.String())
	}
	return out
}

// wordnetGlosses returns up to n real English sentences (WordNet glosses, installed by
// `make setup` as wordnet-base), or nil when the package is absent and NEEDLE_STRICT is
// not set.
func wordnetGlosses(t testing.TB, n int) []string {
	t.Helper()
	f, err := os.Open("/usr/share/wordnet/data.noun")
	if err != nil {
		if os.Getenv("NEEDLE_STRICT") == "1" {
			t.Fatalf("WordNet is missing (%v); run `make setup`", err)
		}
		t.Logf("WordNet is missing, no glosses: %v", err)
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(out) < n {
		if _, gloss, ok := strings.Cut(sc.Text(), " | "); ok {
			out = append(out, strings.TrimSpace(gloss))
		}
	}
	return out
}
