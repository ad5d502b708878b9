package wordpiece

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"needle/testkit/testenv"
)

// runOracle runs testdata/hf_tokenize.py (the real HF tokenizer) with args and returns
// the lines of the file it writes to its last argument.
func runOracle(t *testing.T, args ...string) []string {
	t.Helper()
	py := testenv.Python(t)
	cmd := exec.Command(py, append([]string{filepath.Join("testdata", "hf_tokenize.py")}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hf_tokenize.py %s: %v\n%s", args[0], err, out)
	}
	data, err := os.ReadFile(args[len(args)-1])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func loadMiniLM(t testing.TB) (*Tokenizer, string) {
	t.Helper()
	dir := testenv.MiniLMDir(t)
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tok, filepath.Join(dir, "tokenizer.json")
}

// TestCodepointsMatchHF checks the normalizer and pre-tokenizer on every Unicode scalar
// value c, as "a" c "a", against HF's own normalizer and pre-tokenizer, in blocks of
// 4096 joined by spaces (see hf_tokenize.py). This pins down each character class
// (whitespace, control, punctuation, Mn, CJK, NFD, lowercase) exhaustively, with
// MiniLM's normalizer and with strip_accents off (lowercasing without NFD first).
func TestCodepointsMatchHF(t *testing.T) {
	miniLM, tokJSON := loadMiniLM(t)
	t.Run("miniLM", func(t *testing.T) { compareCodepoints(t, miniLM, tokJSON) })
	t.Run("strip_accents=false", func(t *testing.T) {
		dir := withNormalizer(t, tokJSON, map[string]any{"strip_accents": false})
		tok, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		compareCodepoints(t, tok, filepath.Join(dir, "tokenizer.json"))
	})
}

func compareCodepoints(t *testing.T, tok *Tokenizer, tokJSON string) {
	const block = 4096
	out := filepath.Join(t.TempDir(), "codepoints.jsonl")
	lines := runOracle(t, "codepoints", tokJSON, out)
	if len(lines) != 0x110000/block {
		t.Fatalf("oracle wrote %d lines, want %d", len(lines), 0x110000/block)
	}
	var sc scratch
	for i, line := range lines {
		var rec []json.RawMessage
		var first rune
		var wantNorm string
		var wantWords []string
		if json.Unmarshal([]byte(line), &rec) != nil || len(rec) != 3 ||
			json.Unmarshal(rec[0], &first) != nil || json.Unmarshal(rec[1], &wantNorm) != nil ||
			json.Unmarshal(rec[2], &wantWords) != nil || first != rune(i*block) {
			t.Fatalf("bad oracle line %d", i+1)
		}
		var items []string
		for c := first; c < first+block; c++ {
			if c < 0xD800 || c > 0xDFFF {
				items = append(items, "a"+string(c)+"a")
			}
		}
		gotNorm := string(tok.norm.normalize(&sc, strings.Join(items, " ")))
		if gotNorm != wantNorm {
			at := 0
			for at < min(len(gotNorm), len(wantNorm)) && gotNorm[at] == wantNorm[at] {
				at++
			}
			from := max(at-12, 0)
			t.Errorf("block U+%04X: normalized text differs at byte %d: %+q, HF %+q", first, at,
				gotNorm[from:min(at+12, len(gotNorm))], wantNorm[from:min(at+12, len(wantNorm))])
			continue
		}
		if got := tok.norm.preTokens(gotNorm); !slices.Equal(got, wantWords) {
			for j := range min(len(got), len(wantWords)) {
				if got[j] != wantWords[j] {
					t.Errorf("block U+%04X: pre-token %d is %+q, HF %+q", first, j, got[j], wantWords[j])
					break
				}
			}
			t.Errorf("block U+%04X: %d pre-tokens, HF %d", first, len(got), len(wantWords))
		}
	}
}

// preTokens is the BertPreTokenizer split of s, for tests.
func (n *normalizer) preTokens(s string) []string {
	words := []string{}
	start := -1
	for i, r := range s {
		c := n.unicode.class(r)
		space, punct := c&classSpace != 0, c&classPunct != 0
		if space || punct {
			if start >= 0 {
				words = append(words, s[start:i])
				start = -1
			}
			if !space {
				words = append(words, s[i:i+utf8.RuneLen(r)])
			}
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		words = append(words, s[start:])
	}
	return words
}

func parseIDs(t *testing.T, line string) []int32 {
	t.Helper()
	ids := []int32{}
	for _, f := range strings.Fields(line) {
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			t.Fatalf("bad oracle id %q", f)
		}
		ids = append(ids, int32(v))
	}
	return ids
}

// writeJSONLines writes texts as JSON Lines to a temp file and returns its path.
func writeJSONLines(t testing.TB, texts []string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "texts.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for _, s := range texts {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(append(b, '\n'))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestIDsMatchHF is the differential test: >= 10,000 strings (curated, seeded random
// Unicode, vocabulary pieces, real English glosses) tokenized by the real HF fast
// tokenizer and by this package must give identical ids: with MiniLM's tokenizer.json at
// max_length 256, at a short max_length that truncates most inputs and untruncated
// (long texts are normalized in chunks), and with its
// BertNormalizer flags changed (cased, accents kept, no text cleaning or CJK spacing).
func TestIDsMatchHF(t *testing.T) {
	tok, tokJSON := loadMiniLM(t)
	vocab := slices.Sorted(maps.Keys(tok.vocab))
	texts := append(slices.Clone(curated), wordnetGlosses(t, 2000)...)
	texts = append(texts, randomCorpus(10000, vocab)...)
	t.Logf("%d texts", len(texts))
	in := writeJSONLines(t, texts)
	compare := func(t *testing.T, tok *Tokenizer, tokJSON string, maxLen int) {
		out := filepath.Join(t.TempDir(), "ids.txt")
		lines := runOracle(t, "ids", tokJSON, strconv.Itoa(maxLen), in, out)
		if len(lines) != len(texts) {
			t.Fatalf("oracle wrote %d lines for %d texts", len(lines), len(texts))
		}
		bad := 0
		for i, text := range texts {
			want := parseIDs(t, lines[i])
			if got := tok.Encode(text, maxLen); !slices.Equal(got, want) {
				if bad++; bad <= 20 {
					t.Errorf("text %d %+q:\n got %v\nwant %v", i, text, got, want)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%d of %d texts differ from HF", bad, len(texts))
		}
	}
	for _, maxLen := range []int{256, 12, 0} {
		t.Run(fmt.Sprintf("max_length=%d", maxLen), func(t *testing.T) { compare(t, tok, tokJSON, maxLen) })
	}
	for _, flags := range []map[string]any{
		{"lowercase": false}, // cased: strip_accents null follows lowercase
		{"strip_accents": false},
		{"lowercase": false, "strip_accents": true, "clean_text": false, "handle_chinese_chars": false},
	} {
		t.Run(fmt.Sprint(flags), func(t *testing.T) {
			dir := withNormalizer(t, tokJSON, flags)
			variant, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			compare(t, variant, filepath.Join(dir, "tokenizer.json"), 256)
		})
	}
}

// withNormalizer writes a copy of tokenizer.json with the given BertNormalizer fields
// changed into a temp folder, and returns the folder.
func withNormalizer(t *testing.T, tokJSON string, flags map[string]any) string {
	data, err := os.ReadFile(tokJSON)
	if err != nil {
		t.Fatal(err)
	}
	var j map[string]any
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	maps.Copy(j["normalizer"].(map[string]any), flags)
	if data, err = json.Marshal(j); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
