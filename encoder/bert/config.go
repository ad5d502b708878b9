// Package bert is a BERT encoder (BertModel forward pass, pooling, L2 normalization) over
// the ops of needle/kernels/bert/nn, loading Hugging Face model folders: config.json,
// model.safetensors (F32/F16/BF16, converted to fp32 once) and the tokenizer files read by
// needle/encoder/wordpiece. It serves e5-base-v2, all-MiniLM-L6-v2 and bge-small alike.
package bert

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Config is the shape of a BertModel (the fields of HF's config.json that the forward pass uses).
type Config struct {
	Layers        int     `json:"num_hidden_layers"`
	Hidden        int     `json:"hidden_size"`
	Heads         int     `json:"num_attention_heads"`
	Intermediate  int     `json:"intermediate_size"`
	MaxPositions  int     `json:"max_position_embeddings"`
	VocabSize     int     `json:"vocab_size"`
	TypeVocabSize int     `json:"type_vocab_size"`
	Eps           float32 `json:"layer_norm_eps"`
}

// E5Base is the shape of intfloat/e5-base-v2 (bert-base-uncased).
var E5Base = Config{Layers: 12, Hidden: 768, Heads: 12, Intermediate: 3072, MaxPositions: 512,
	VocabSize: 30522, TypeVocabSize: 2, Eps: 1e-12}

// hfConfig is config.json: the Config plus the fields that decide whether we support it.
type hfConfig struct {
	Config
	Architectures []string `json:"architectures"`
	ModelType     string   `json:"model_type"`
	HiddenAct     string   `json:"hidden_act"`
	PositionType  string   `json:"position_embedding_type"`
}

// readConfig parses and checks dir/config.json.
func readConfig(dir string) (Config, error) {
	path := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	var c hfConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	if c.ModelType != "bert" {
		return Config{}, fmt.Errorf("%s: model_type %q is not supported (want bert)", path, c.ModelType)
	}
	if len(c.Architectures) > 0 && !slices.ContainsFunc(c.Architectures, func(a string) bool { return strings.HasPrefix(a, "Bert") }) {
		return Config{}, fmt.Errorf("%s: architectures %v are not supported (want BertModel)", path, c.Architectures)
	}
	if c.HiddenAct != "gelu" {
		return Config{}, fmt.Errorf("%s: hidden_act %q is not supported (want gelu, the erf form)", path, c.HiddenAct)
	}
	if c.PositionType != "" && c.PositionType != "absolute" {
		return Config{}, fmt.Errorf("%s: position_embedding_type %q is not supported (want absolute)", path, c.PositionType)
	}
	if err := c.Config.check(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c.Config, nil
}

// check rejects shapes the forward pass cannot run.
func (c Config) check() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"num_hidden_layers", c.Layers}, {"hidden_size", c.Hidden}, {"num_attention_heads", c.Heads},
		{"intermediate_size", c.Intermediate}, {"max_position_embeddings", c.MaxPositions},
		{"vocab_size", c.VocabSize}, {"type_vocab_size", c.TypeVocabSize}} {
		if f.v <= 0 || f.v > 1<<20 {
			return fmt.Errorf("%s = %d is out of range", f.name, f.v)
		}
	}
	if c.Hidden%c.Heads != 0 {
		return fmt.Errorf("hidden_size %d is not a multiple of num_attention_heads %d", c.Hidden, c.Heads)
	}
	if !(c.Eps > 0 && c.Eps < 1) {
		return fmt.Errorf("layer_norm_eps = %g is out of range", c.Eps)
	}
	return nil
}

// readPooling returns the pooling mode of a sentence-transformers folder
// (1_Pooling/config.json), or "" when the folder has none.
func readPooling(dir string) (string, error) {
	path := filepath.Join(dir, "1_Pooling", "config.json")
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var p struct {
		CLS  bool `json:"pooling_mode_cls_token"`
		Mean bool `json:"pooling_mode_mean_tokens"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case p.CLS && !p.Mean:
		return "cls", nil
	case p.Mean && !p.CLS:
		return "mean", nil
	}
	return "", fmt.Errorf("%s: only one of pooling_mode_cls_token and pooling_mode_mean_tokens is supported", path)
}
