package wordpiece

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestVocabTxtMatchesTokenizerJSON loads MiniLM from vocab.txt + tokenizer_config.json
// alone (the fallback HF's BertTokenizerFast conversion follows) and checks it gives the
// same ids as tokenizer.json on the whole test corpus.
func TestVocabTxtMatchesTokenizerJSON(t *testing.T) {
	fromJSON, tokJSON := loadMiniLM(t)
	src := filepath.Dir(tokJSON)
	dir := t.TempDir()
	for _, name := range []string{"vocab.txt", "tokenizer_config.json"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fromTxt, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fromTxt.VocabSize() != fromJSON.VocabSize() || fromTxt.ClsID() != fromJSON.ClsID() ||
		fromTxt.SepID() != fromJSON.SepID() || fromTxt.PadID() != fromJSON.PadID() || fromTxt.UnkID() != fromJSON.UnkID() {
		t.Fatalf("vocab.txt tokenizer differs in size or special ids")
	}
	texts := append(slices.Clone(curated), randomCorpus(3000, slices.Sorted(maps.Keys(fromJSON.vocab)))...)
	for _, s := range texts {
		if a, b := fromTxt.Encode(s, 256), fromJSON.Encode(s, 256); !slices.Equal(a, b) {
			t.Fatalf("%+q: vocab.txt gives %v, tokenizer.json %v", s, a, b)
		}
	}
}

// TestLoadErrors checks that bad model folders give errors naming the file and field.
func TestLoadErrors(t *testing.T) {
	const good = `{"added_tokens":[],"normalizer":{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,"strip_accents":null,"lowercase":true},
"pre_tokenizer":{"type":"BertPreTokenizer"},"post_processor":{"type":"BertProcessing","sep":["[SEP]",3],"cls":["[CLS]",2]},
"model":{"type":"WordPiece","unk_token":"[UNK]","continuing_subword_prefix":"##","max_input_chars_per_word":100,
"vocab":{"[PAD]":0,"[UNK]":1,"[CLS]":2,"[SEP]":3,"a":4,"##b":5}}}`
	cases := []struct {
		name, json, want string
	}{
		{"not json", `{`, "unexpected end"},
		{"bpe", strings.Replace(good, `"type":"WordPiece"`, `"type":"BPE"`, 1), `model.type "BPE"`},
		{"normalizer", strings.Replace(good, `"BertNormalizer"`, `"NFC"`, 1), "normalizer: only BertNormalizer"},
		{"pre_tokenizer", strings.Replace(good, `"BertPreTokenizer"`, `"Whitespace"`, 1), "pre_tokenizer: only BertPreTokenizer"},
		{"unk", strings.Replace(good, `"unk_token":"[UNK]"`, `"unk_token":"<unk>"`, 1), `model: token "<unk>" is not in the vocabulary`},
		{"max chars", strings.Replace(good, `"max_input_chars_per_word":100`, `"max_input_chars_per_word":0`, 1), "max_input_chars_per_word 0"},
		{"negative id", strings.Replace(good, `"a":4`, `"a":-4`, 1), `vocab["a"] has negative id -4`},
		{"no post", strings.Replace(good, `"post_processor":{"type":"BertProcessing","sep":["[SEP]",3],"cls":["[CLS]",2]},`, ``, 1), "post_processor: missing"},
		{"sep id", strings.Replace(good, `["[SEP]",3]`, `["[SEP]",99]`, 1), "special token id 99 is outside"},
		{"lstrip", strings.Replace(good, `"added_tokens":[]`, `"added_tokens":[{"id":2,"content":"[CLS]","lstrip":true}]`, 1), `added_tokens[0] "[CLS]": normalized, single_word, lstrip`},
		{"template", strings.Replace(good, `{"type":"BertProcessing","sep":["[SEP]",3],"cls":["[CLS]",2]}`, `{"type":"TemplateProcessing","single":[{"Sequence":{"id":"A"}}]}`, 1), "single must be [CLS] $A [SEP]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(c.json), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "tokenizer.json") {
				t.Fatalf("Load: %v, want an error naming tokenizer.json and containing %q", err, c.want)
			}
		})
	}
	t.Run("good", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(good), 0o644); err != nil {
			t.Fatal(err)
		}
		tok, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		// "abb" -> a ##b ##b; "ba" has no word-initial "b" -> [UNK]; [CLS] in text is not
		// an added token here (added_tokens is empty), so it is split as punctuation.
		got := tok.Encode("ABB ba", 0)
		if want := []int32{2, 4, 5, 5, 1, 3}; !slices.Equal(got, want) {
			t.Fatalf("Encode = %v, want %v", got, want)
		}
	})
	t.Run("no files", func(t *testing.T) {
		_, err := Load(t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "vocab.txt") {
			t.Fatalf("Load of an empty folder: %v, want an error naming vocab.txt", err)
		}
	})
}

// TestAppendEncodeAllocs checks the hot path allocates nothing once buffers are warm.
func TestAppendEncodeAllocs(t *testing.T) {
	tok, _ := loadMiniLM(t)
	texts := []string{
		"passage: \"Charles Darwin\"\nCharles Robert Darwin was an English naturalist.",
		"Ångström café naïve — « résumé » 中文 😀",
	}
	dst := make([]int32, 0, 512)
	for _, s := range texts {
		dst = tok.AppendEncode(dst[:0], s, 256) // warm the pooled scratch buffers
		if n := testing.AllocsPerRun(100, func() { dst = tok.AppendEncode(dst[:0], s, 256) }); n != 0 {
			t.Errorf("%+q: %v allocations per AppendEncode, want 0", s, n)
		}
	}
}

// TestConcurrentEncode runs Encode from several goroutines (run with -race).
func TestConcurrentEncode(t *testing.T) {
	tok, _ := loadMiniLM(t)
	texts := append(slices.Clone(curated), randomCorpus(500, slices.Sorted(maps.Keys(tok.vocab)))...)
	want := make([][]int32, len(texts))
	for i, s := range texts {
		want[i] = tok.Encode(s, 64)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < len(texts); i += 2 {
				if got := tok.Encode(texts[i], 64); !slices.Equal(got, want[i]) {
					t.Errorf("goroutine %d: %+q gave %v, want %v", g, texts[i], got, want[i])
				}
			}
		})
	}
	wg.Wait()
}

// FuzzEncode checks invariants on arbitrary bytes (invalid UTF-8 included): no panic,
// [CLS] first, [SEP] last, length within maxLen, ids inside the vocabulary, and the
// same ids through AppendEncode on a non-empty buffer.
func FuzzEncode(f *testing.F) {
	tok, _ := loadMiniLM(f)
	for _, s := range curated {
		f.Add(s, 256)
	}
	f.Add("\xff\xfe invalid utf-8 \xc3", 5)
	f.Add("a", 1)
	f.Add("[MASK]", 2)
	f.Fuzz(func(t *testing.T, s string, maxLen int) {
		maxLen = maxLen%600 + 2
		if maxLen < 2 {
			maxLen += 600
		}
		ids := tok.Encode(s, maxLen)
		if len(ids) < 2 || len(ids) > maxLen || ids[0] != tok.ClsID() || ids[len(ids)-1] != tok.SepID() {
			t.Fatalf("Encode(%+q, %d) = %v: want [CLS] ... [SEP] of length 2..%d", s, maxLen, ids, maxLen)
		}
		for _, id := range ids {
			if id < 0 || int(id) >= tok.VocabSize() {
				t.Fatalf("Encode(%+q) gave id %d outside [0, %d)", s, id, tok.VocabSize())
			}
		}
		prefix := []int32{7, 8}
		if got := tok.AppendEncode(prefix, s, maxLen); !slices.Equal(got[:2], prefix) || !slices.Equal(got[2:], ids) {
			t.Fatalf("AppendEncode differs from Encode for %+q", s)
		}
	})
}
