package wordpiece

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Load reads the tokenizer of an HF model folder: tokenizer.json when present (the fast
// tokenizer's own file, and what HF uses), else vocab.txt plus the optional
// tokenizer_config.json (do_lower_case, strip_accents, tokenize_chinese_chars, unk_token).
// The truncation and padding sections of tokenizer.json are ignored: callers pass maxLen.
func Load(modelDir string) (*Tokenizer, error) {
	path := filepath.Join(modelDir, "tokenizer.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return loadVocabTxt(modelDir)
	}
	if err != nil {
		return nil, err
	}
	t, err := parseTokenizerJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// tokenizerJSON is the part of HF's tokenizer.json this package implements.
type tokenizerJSON struct {
	AddedTokens []struct {
		ID         int32  `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		Lstrip     bool   `json:"lstrip"`
		Rstrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
	} `json:"added_tokens"`
	Normalizer *struct {
		Type               string `json:"type"`
		CleanText          bool   `json:"clean_text"`
		HandleChineseChars bool   `json:"handle_chinese_chars"`
		StripAccents       *bool  `json:"strip_accents"`
		Lowercase          bool   `json:"lowercase"`
	} `json:"normalizer"`
	PreTokenizer *struct {
		Type string `json:"type"`
	} `json:"pre_tokenizer"`
	PostProcessor *postProcessorJSON `json:"post_processor"`
	Padding       *struct {
		PadID int32 `json:"pad_id"`
	} `json:"padding"`
	Model struct {
		Type                    string           `json:"type"`
		UnkToken                string           `json:"unk_token"`
		ContinuingSubwordPrefix string           `json:"continuing_subword_prefix"`
		MaxInputCharsPerWord    int              `json:"max_input_chars_per_word"`
		Vocab                   map[string]int32 `json:"vocab"`
	} `json:"model"`
}

// postProcessorJSON is a BertProcessing ({"cls": ["[CLS]", 101], "sep": [...]}) or a
// TemplateProcessing whose single template is [CLS] $A [SEP].
type postProcessorJSON struct {
	Type          string            `json:"type"`
	Cls           []json.RawMessage `json:"cls"`
	Sep           []json.RawMessage `json:"sep"`
	Single        []json.RawMessage `json:"single"`
	SpecialTokens map[string]struct {
		IDs []int32 `json:"ids"`
	} `json:"special_tokens"`
}

func parseTokenizerJSON(data []byte) (*Tokenizer, error) {
	var j tokenizerJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, err
	}
	if j.Model.Type != "WordPiece" {
		return nil, fmt.Errorf("model.type %q: only WordPiece is supported", j.Model.Type)
	}
	if j.Normalizer == nil || j.Normalizer.Type != "BertNormalizer" {
		return nil, errors.New("normalizer: only BertNormalizer is supported")
	}
	if j.PreTokenizer == nil || j.PreTokenizer.Type != "BertPreTokenizer" {
		return nil, errors.New("pre_tokenizer: only BertPreTokenizer is supported")
	}
	n := j.Normalizer
	t := &Tokenizer{norm: normalizer{
		cleanText:    n.CleanText,
		chineseChars: n.HandleChineseChars,
		stripAccents: n.Lowercase,
		lowercase:    n.Lowercase,
		unicode:      hfUnicode(),
	}}
	if n.StripAccents != nil { // null: follow lowercase, as HF does
		t.norm.stripAccents = *n.StripAccents
	}
	if err := t.setVocab(j.Model.Vocab, j.Model.ContinuingSubwordPrefix, j.Model.MaxInputCharsPerWord, j.Model.UnkToken); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	for i, a := range j.AddedTokens {
		if a.Normalized || a.SingleWord || a.Lstrip || a.Rstrip {
			return nil, fmt.Errorf("added_tokens[%d] %q: normalized, single_word, lstrip and rstrip are not supported", i, a.Content)
		}
		if err := t.addToken(a.Content, a.ID); err != nil {
			return nil, fmt.Errorf("added_tokens[%d]: %w", i, err)
		}
	}
	var err error
	if t.cls, t.sep, err = j.PostProcessor.clsSep(); err != nil {
		return nil, fmt.Errorf("post_processor: %w", err)
	}
	if j.Padding != nil {
		t.pad = j.Padding.PadID
	} else if t.pad, err = t.lookup("[PAD]"); err != nil {
		return nil, err
	}
	for _, id := range []int32{t.cls, t.sep, t.pad} {
		if id < 0 || int(id) >= t.vocabSize {
			return nil, fmt.Errorf("special token id %d is outside the vocabulary (size %d)", id, t.vocabSize)
		}
	}
	return t, nil
}

// clsSep returns the ids of the tokens the post-processor puts before and after a
// single sequence.
func (p *postProcessorJSON) clsSep() (cls, sep int32, err error) {
	if p == nil {
		return 0, 0, errors.New("missing (needed for [CLS] ... [SEP])")
	}
	switch p.Type {
	case "BertProcessing":
		var c, s int32
		if len(p.Cls) != 2 || len(p.Sep) != 2 || json.Unmarshal(p.Cls[1], &c) != nil || json.Unmarshal(p.Sep[1], &s) != nil {
			return 0, 0, errors.New(`BertProcessing needs "cls" and "sep" as [token, id]`)
		}
		return c, s, nil
	case "TemplateProcessing":
		if len(p.Single) != 3 {
			return 0, 0, errors.New("TemplateProcessing: single must be [CLS] $A [SEP]")
		}
		first, err1 := p.specialID(p.Single[0])
		last, err2 := p.specialID(p.Single[2])
		if err := errors.Join(err1, err2); err != nil {
			return 0, 0, fmt.Errorf("TemplateProcessing: single must be [CLS] $A [SEP]: %w", err)
		}
		return first, last, nil
	}
	return 0, 0, fmt.Errorf("type %q is not supported", p.Type)
}

// specialID resolves one {"SpecialToken": {"id": "[CLS]"}} template item to its id.
func (p *postProcessorJSON) specialID(item json.RawMessage) (int32, error) {
	var v struct {
		SpecialToken *struct {
			ID string `json:"id"`
		}
	}
	if err := json.Unmarshal(item, &v); err != nil || v.SpecialToken == nil {
		return 0, fmt.Errorf("%s is not a SpecialToken", item)
	}
	st, ok := p.SpecialTokens[v.SpecialToken.ID]
	if !ok || len(st.IDs) != 1 {
		return 0, fmt.Errorf("special_tokens[%q] must have exactly one id", v.SpecialToken.ID)
	}
	return st.IDs[0], nil
}

// setVocab installs the WordPiece vocabulary and model parameters.
func (t *Tokenizer) setVocab(vocab map[string]int32, prefix string, maxWordChars int, unk string) error {
	if len(vocab) == 0 {
		return errors.New("empty vocab")
	}
	if maxWordChars <= 0 {
		return fmt.Errorf("max_input_chars_per_word %d must be positive", maxWordChars)
	}
	t.vocab, t.cont, t.maxWordChars = vocab, map[string]int32{}, maxWordChars
	for tok, id := range vocab {
		if id < 0 {
			return fmt.Errorf("vocab[%q] has negative id %d", tok, id)
		}
		t.vocabSize = max(t.vocabSize, int(id)+1)
		t.maxVocabBytes = max(t.maxVocabBytes, len(tok))
		if rest, ok := strings.CutPrefix(tok, prefix); ok && prefix != "" {
			t.cont[rest] = id
			t.maxContBytes = max(t.maxContBytes, len(rest))
		}
	}
	var err error
	t.unk, err = t.lookup(unk)
	return err
}

// addToken registers an added token matched verbatim in the raw text.
func (t *Tokenizer) addToken(content string, id int32) error {
	if content == "" || id < 0 {
		return fmt.Errorf("token %q with id %d: need non-empty content and id >= 0", content, id)
	}
	t.added = append(t.added, addedToken{content: content, id: id})
	t.vocabSize = max(t.vocabSize, int(id)+1)
	return nil
}

func (t *Tokenizer) lookup(tok string) (int32, error) {
	id, ok := t.vocab[tok]
	if !ok {
		return 0, fmt.Errorf("token %q is not in the vocabulary", tok)
	}
	return id, nil
}

// bertSpecials are the tokens HF's BertTokenizerFast treats as added specials when it
// converts a vocab.txt model.
var bertSpecials = []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}

// loadVocabTxt builds the tokenizer HF derives from vocab.txt (one token per line, id =
// line number - 1) and tokenizer_config.json.
func loadVocabTxt(dir string) (*Tokenizer, error) {
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	cfg := struct {
		DoLowerCase          *bool `json:"do_lower_case"`
		StripAccents         *bool `json:"strip_accents"`
		TokenizeChineseChars *bool `json:"tokenize_chinese_chars"`
	}{}
	if data, err := os.ReadFile(cfgPath); err == nil {
		if err := json.Unmarshal(data, &cfg); err != nil {
			return nil, fmt.Errorf("%s: %w", cfgPath, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	orTrue := func(b *bool) bool { return b == nil || *b }
	t := &Tokenizer{norm: normalizer{
		cleanText:    true,
		chineseChars: orTrue(cfg.TokenizeChineseChars),
		lowercase:    orTrue(cfg.DoLowerCase),
		unicode:      hfUnicode(),
	}}
	t.norm.stripAccents = t.norm.lowercase
	if cfg.StripAccents != nil {
		t.norm.stripAccents = *cfg.StripAccents
	}

	path := filepath.Join(dir, "vocab.txt")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (and no tokenizer.json)", path, err)
	}
	vocab := map[string]int32{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for id := int32(0); sc.Scan(); id++ {
		vocab[strings.TrimSuffix(sc.Text(), "\r")] = id
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := t.setVocab(vocab, "##", 100, "[UNK]"); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, s := range bertSpecials {
		if id, ok := vocab[s]; ok {
			t.added = append(t.added, addedToken{content: s, id: id})
		}
	}
	for _, p := range []struct {
		id  *int32
		tok string
	}{{&t.cls, "[CLS]"}, {&t.sep, "[SEP]"}, {&t.pad, "[PAD]"}} {
		if *p.id, err = t.lookup(p.tok); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return t, nil
}
