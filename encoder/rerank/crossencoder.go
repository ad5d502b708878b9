// Package rerank is the cross-encoder of retrieve-then-rerank (Search-R1's
// retrieval_rerank_server.py and rerank_server.py): a BERT sequence-classification model
// (HF BertForSequenceClassification, one logit) scoring (query, passage) pairs as
// sentence-transformers' CrossEncoder.predict does, on needle's encoder (encoder/bert).
package rerank

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"needle/encoder/bert"
	"needle/encoder/wordpiece"
	"needle/safetensors"
)

// Options tune a CrossEncoder; zero values take the defaults.
type Options struct {
	// MaxLength is the tokens of a pair, specials included (0: the tokenizer's
	// model_max_length, as CrossEncoder takes it, capped by max_position_embeddings).
	MaxLength int
	BatchSize int // pairs per forward pass (0: 32, Search-R1's reranker batch)
	Threads   int
	Precision bert.Precision // of the encoder's Linears ("": fp16)
}

// CrossEncoder scores pairs. Safe for concurrent use.
type CrossEncoder struct {
	enc    *bert.Encoder
	tok    *wordpiece.Tokenizer
	hidden int
	maxLen int
	// The head: pooled = tanh(poolW h_CLS + poolB), logit = clsW . pooled + clsB.
	poolW, poolB, clsW []float32
	clsB               float32
	sigmoid            bool // CrossEncoder's default activation for one label
}

// headConfig is what config.json says about the head.
type headConfig struct {
	Architectures []string          `json:"architectures"`
	NumLabels     int               `json:"num_labels"`
	ID2Label      map[string]string `json:"id2label"`
	MaxPositions  int               `json:"max_position_embeddings"`
	// Activation is sentence-transformers' sbert_ce_default_activation_function (the
	// ms-marco cross-encoders: torch.nn.modules.linear.Identity); absent, one label means Sigmoid.
	Activation string `json:"sbert_ce_default_activation_function"`
}

// Load reads an HF BertForSequenceClassification folder (config.json, model.safetensors with
// bert.* and classifier.* tensors, the tokenizer). A model without that head, or with more
// than one label, is an error naming what is missing.
func Load(dir string, opt Options) (*CrossEncoder, error) {
	var hc headConfig
	cfgPath := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(cfgPath)
	if err == nil {
		err = json.Unmarshal(b, &hc)
	}
	if err != nil {
		return nil, fmt.Errorf("cross-encoder: %w", err)
	}
	if !slices.Contains(hc.Architectures, "BertForSequenceClassification") {
		return nil, fmt.Errorf("cross-encoder: %s: architectures %v, want BertForSequenceClassification (a cross-encoder such as cross-encoder/ms-marco-MiniLM-L12-v2)", cfgPath, hc.Architectures)
	}
	labels := hc.NumLabels
	if len(hc.ID2Label) > 0 {
		labels = len(hc.ID2Label)
	}
	if labels != 1 {
		return nil, fmt.Errorf("cross-encoder: %s: %d labels, want 1 (a relevance logit)", cfgPath, labels)
	}
	c := &CrossEncoder{}
	switch a := hc.Activation; {
	case a == "" || strings.HasSuffix(a, ".Sigmoid"):
		c.sigmoid = true
	case strings.HasSuffix(a, ".Identity"):
	default:
		return nil, fmt.Errorf("cross-encoder: %s: sbert_ce_default_activation_function %q is not supported (Identity or Sigmoid)", cfgPath, a)
	}
	if c.maxLen, err = maxLength(dir, opt.MaxLength, hc.MaxPositions); err != nil {
		return nil, err
	}
	batch := cmp.Or(opt.BatchSize, 32)
	enc, err := bert.Load(dir, bert.Options{MaxLength: c.maxLen, Pooling: "cls", SkipNormalize: true, SegmentB: true,
		BatchSize: batch, Threads: opt.Threads, Precision: opt.Precision, MaxBatchTokens: batch * c.maxLen})
	if err != nil {
		return nil, fmt.Errorf("cross-encoder: %w", err)
	}
	c.enc, c.tok, c.hidden = enc, enc.Tokenizer(), enc.Dim()
	if err := c.loadHead(filepath.Join(dir, "model.safetensors")); err != nil {
		return nil, fmt.Errorf("cross-encoder: %w", err)
	}
	return c, nil
}

// maxLength is opt, else tokenizer_config.json's model_max_length, capped by the positions.
func maxLength(dir string, opt, positions int) (int, error) {
	n := opt
	if n == 0 {
		var tc struct {
			ModelMaxLength float64 `json:"model_max_length"`
		}
		if b, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json")); err == nil && json.Unmarshal(b, &tc) == nil && tc.ModelMaxLength > 0 && tc.ModelMaxLength < 1e6 {
			n = int(tc.ModelMaxLength)
		}
	}
	if n == 0 || n > positions {
		n = positions
	}
	if n < 4 {
		return 0, fmt.Errorf("cross-encoder: max length %d leaves no room for a pair", n)
	}
	return n, nil
}

// loadHead reads the pooler and classifier tensors.
func (c *CrossEncoder) loadHead(path string) error {
	f, err := safetensors.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	H := int64(c.hidden)
	get := func(name string, shape ...int64) []float32 {
		if err != nil {
			return nil
		}
		t, ok := f.Tensor(name)
		if !ok {
			err = fmt.Errorf("%s: no tensor %q: not a BertForSequenceClassification checkpoint (the classification head is missing)", path, name)
			return nil
		}
		if !slices.Equal(t.Shape, shape) {
			err = fmt.Errorf("%s: tensor %q has shape %v, want %v (one label, hidden %d)", path, name, t.Shape, shape, H)
			return nil
		}
		var x []float32
		x, err = f.Float32(name)
		return x
	}
	c.poolW, c.poolB = get("bert.pooler.dense.weight", H, H), get("bert.pooler.dense.bias", H)
	c.clsW = get("classifier.weight", 1, H)
	if bias := get("classifier.bias", 1); err == nil {
		c.clsB = bias[0]
	}
	return err
}

// MaxLength is the tokens of a pair, specials included.
func (c *CrossEncoder) MaxLength() int { return c.maxLen }

// Score returns the score of each (query, passage) pair: the logit, through a sigmoid when
// the model's default activation is one (see headConfig.Activation).
func (c *CrossEncoder) Score(ctx context.Context, queries, passages []string) ([]float32, error) {
	if len(queries) != len(passages) {
		return nil, errors.New("rerank: as many queries as passages")
	}
	seqs := make([][]int32, len(queries))
	for i := range queries {
		seqs[i] = c.pair(queries[i], passages[i])
	}
	cls, err := c.enc.EncodeTokens(ctx, seqs)
	if err != nil {
		return nil, err
	}
	H := c.hidden
	out := make([]float32, len(queries))
	pooled := make([]float32, H)
	for i := range out {
		h := cls[i*H : (i+1)*H]
		for o := range H {
			var s float32
			for j, w := range c.poolW[o*H : (o+1)*H] {
				s += w * h[j]
			}
			pooled[o] = float32(math.Tanh(float64(s + c.poolB[o])))
		}
		var logit float32
		for j, w := range c.clsW {
			logit += w * pooled[j]
		}
		logit += c.clsB
		if c.sigmoid {
			logit = float32(1 / (1 + math.Exp(-float64(logit))))
		}
		out[i] = logit
	}
	return out, nil
}

// pair is [CLS] query [SEP] passage [SEP], the passage and its [SEP] of token type 1, cut to
// MaxLength as HF's "longest_first" truncation does (tokenizers' truncate_encodings: the
// shorter side keeps what it can up to half, the longer side the rest).
func (c *CrossEncoder) pair(query, passage string) []int32 {
	a := c.tok.Encode(query, 0)
	b := c.tok.Encode(passage, 0)
	a, b = a[1:len(a)-1], b[1:len(b)-1]
	na, nb := truncateLongestFirst(len(a), len(b), c.maxLen-3)
	off := c.enc.SegmentBOffset()
	seq := make([]int32, 0, na+nb+3)
	seq = append(seq, c.tok.ClsID())
	seq = append(seq, a[:na]...)
	seq = append(seq, c.tok.SepID())
	for _, id := range b[:nb] {
		seq = append(seq, id+off)
	}
	return append(seq, c.tok.SepID()+off)
}

// truncateLongestFirst returns how many of a pair's n1 and n2 tokens HF's tokenizers keep
// within limit.
func truncateLongestFirst(n1, n2, limit int) (int, int) {
	if n1+n2 <= limit {
		return n1, n2
	}
	short, long := min(n1, n2), max(n1, n2)
	keepShort, keepLong := short, long // caps, as the Rust code computes them
	if short > limit {
		keepLong = short
	} else {
		keepLong = max(short, limit-short)
	}
	if keepShort+keepLong > limit {
		keepShort = limit / 2
		keepLong = keepShort + limit%2
	}
	keepShort, keepLong = min(keepShort, short), min(keepLong, long)
	if n1 > n2 {
		return keepLong, keepShort
	}
	return keepShort, keepLong
}
