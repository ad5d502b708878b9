package bert

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"needle/encoder/wordpiece"
	"needle/internal/byteview"
	"needle/internal/half"
	"needle/kernels/bert/nn"
	"needle/platform/cpu"
	"needle/safetensors"
	"needle/testkit/testenv"
)

// tinyConfig is a 2-layer BERT with MiniLM's vocabulary, small enough to write in a test.
var tinyConfig = Config{Layers: 2, Hidden: 8, Heads: 2, Intermediate: 16, MaxPositions: 64,
	VocabSize: 30522, TypeVocabSize: 2, Eps: 1e-12}

// tinyWeights are seeded random weights of tinyConfig, fp16 on the host.
func tinyWeights(t *testing.T, seed int64) *weights {
	w, err := randomWeights(tinyConfig, seed, packer{ops: nn.New(cpu.Ref), prec: FP16})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// namedTensors lists the checkpoint tensors of w under HF's BertModel names (the packed fp16
// matrices unpacked at their exact float32 values).
func namedTensors(cfg Config, w *weights) map[string][]float32 {
	H, I := cfg.Hidden, cfg.Intermediate
	f32 := func(h []uint16, out, in int) []float32 {
		x := make([]float32, out*in)
		for o := 0; o < out; o++ {
			for i := 0; i < in; i++ {
				x[o*in+i] = half.ToFloat32(h[(o/16*in+i)*16+o%16])
			}
		}
		return x
	}
	types := append(append([]float32{}, w.type0...), make([]float32, H*(cfg.TypeVocabSize-1))...)
	m := map[string][]float32{
		"embeddings.word_embeddings.weight": w.word, "embeddings.position_embeddings.weight": w.pos,
		"embeddings.token_type_embeddings.weight": types,
		"embeddings.LayerNorm.weight":             w.embGamma, "embeddings.LayerNorm.bias": w.embBeta,
	}
	for l, lw := range w.layers {
		p := fmt.Sprintf("encoder.layer.%d.", l)
		qkvW := f32(lw.qkv.half, 3*H, H)
		for i, qkv := range []string{"query", "key", "value"} {
			m[p+"attention.self."+qkv+".weight"] = qkvW[i*H*H : (i+1)*H*H]
			m[p+"attention.self."+qkv+".bias"] = lw.qkvB[i*H : (i+1)*H]
		}
		m[p+"attention.output.dense.weight"], m[p+"attention.output.dense.bias"] = f32(lw.attnOut.half, H, H), lw.attnOutB
		m[p+"attention.output.LayerNorm.weight"], m[p+"attention.output.LayerNorm.bias"] = lw.ln1Gamma, lw.ln1Beta
		m[p+"intermediate.dense.weight"], m[p+"intermediate.dense.bias"] = f32(lw.ffnIn.half, I, H), lw.ffnInB
		m[p+"output.dense.weight"], m[p+"output.dense.bias"] = f32(lw.ffnOut.half, H, I), lw.ffnOutB
		m[p+"output.LayerNorm.weight"], m[p+"output.LayerNorm.bias"] = lw.ln2Gamma, lw.ln2Beta
	}
	return m
}

// shapeOf is the checkpoint shape of a tensor of n elements: [n] or [n/width, width].
func shapeOf(name string, n, width int) []int64 {
	if strings.HasSuffix(name, ".weight") && !strings.Contains(name, "LayerNorm") {
		return []int64{int64(n / width), int64(width)}
	}
	return []int64{int64(n)}
}

// encodeAs converts x to dtype's little-endian bytes (F16 by truncation, normal range only).
func encodeAs(x []float32, dtype string) []byte {
	switch dtype {
	case "BF16", "F16":
		b := make([]byte, 2*len(x))
		for i, v := range x {
			bits := math.Float32bits(v)
			h := uint16(bits >> 16)
			if dtype == "F16" {
				exp := int(bits>>23&0xff) - 127 + 15
				h = uint16(bits>>16) & 0x8000
				if exp > 0 && exp < 31 {
					h |= uint16(exp)<<10 | uint16(bits>>13&0x3ff)
				}
			}
			binary.LittleEndian.PutUint16(b[2*i:], h)
		}
		return b
	}
	return append([]byte{}, byteview.Float32s(x)...)
}

// writeTinyModel writes a model folder for cfg/w; edit may change the tensors (name -> data)
// and config.json fields before writing.
func writeTinyModel(t *testing.T, w *weights, prefix, dtype string, edit func(tensors map[string][]float32, shapes map[string][]int64, config map[string]any)) string {
	t.Helper()
	src := testenv.MiniLMDir(t)
	dir := t.TempDir()
	for _, f := range []string{"tokenizer.json", "vocab.txt", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	cfg := tinyConfig
	tensors := namedTensors(cfg, w)
	shapes := map[string][]int64{}
	for name, x := range tensors {
		width := cfg.Hidden
		if strings.HasSuffix(name, "output.dense.weight") && !strings.Contains(name, "attention") {
			width = cfg.Intermediate
		}
		shapes[name] = shapeOf(name, len(x), width)
	}
	config := map[string]any{"architectures": []string{"BertModel"}, "model_type": "bert", "hidden_act": "gelu",
		"num_hidden_layers": cfg.Layers, "hidden_size": cfg.Hidden, "num_attention_heads": cfg.Heads,
		"intermediate_size": cfg.Intermediate, "max_position_embeddings": cfg.MaxPositions,
		"vocab_size": cfg.VocabSize, "type_vocab_size": cfg.TypeVocabSize, "layer_norm_eps": cfg.Eps}
	if edit != nil {
		edit(tensors, shapes, config)
	}
	b, _ := json.Marshal(config)
	os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
	var decl []safetensors.Tensor
	for name := range tensors {
		decl = append(decl, safetensors.Tensor{Name: prefix + name, DType: dtype, Shape: shapes[name]})
	}
	sw, err := safetensors.Create(filepath.Join(dir, "model.safetensors"), decl, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range decl {
		if err := sw.WriteTensor(d.Name, encodeAs(tensors[strings.TrimPrefix(d.Name, prefix)], dtype)); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

var tinyTexts = []string{"", "hello world", "a longer sentence about the capital of france and its rivers", "北京"}

func encodeDir(t *testing.T, dir string) []float32 {
	t.Helper()
	e, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.Encode(tinyTexts, "")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestLoadDTypesAndPrefix(t *testing.T) {
	w := tinyWeights(t, 7)
	want := encodeDir(t, writeTinyModel(t, w, "", "F32", nil))
	ops, err := nn.Selected()
	if err != nil {
		t.Fatal(err)
	}
	direct, err := newEncoder(tinyConfig, mustTokenizer(t), ops, Options{}, func(packer) (*weights, error) { return w, nil })
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := direct.Encode(tinyTexts, ""); !equal(got, want) {
		t.Error("weights written and loaded back encode differently from the weights in memory")
	}
	if got := encodeDir(t, writeTinyModel(t, w, "bert.", "F32", nil)); !equal(got, want) {
		t.Error("bert.-prefixed checkpoint encodes differently")
	}
	H := tinyConfig.Hidden
	for _, tc := range []struct {
		dtype string
		min   float64
	}{{"F16", 0.9999}, {"BF16", 0.999}} {
		got := encodeDir(t, writeTinyModel(t, w, "", tc.dtype, nil))
		for i := range tinyTexts {
			if c := dot(got[i*H:(i+1)*H], want[i*H:(i+1)*H]); c < tc.min {
				t.Errorf("%s: text %d cosine %g with the F32 model", tc.dtype, i, c)
			}
		}
	}
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func mustTokenizer(t *testing.T) *wordpiece.Tokenizer {
	t.Helper()
	e, err := Load(testenv.MiniLMDir(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return e.Tokenizer()
}

func TestLoadErrorsNameFileAndTensor(t *testing.T) {
	w := tinyWeights(t, 8)
	const q = "encoder.layer.1.attention.self.query.weight"
	for _, tc := range []struct {
		name  string
		dtype string
		edit  func(map[string][]float32, map[string][]int64, map[string]any)
		want  []string
	}{
		{"missing tensor", "F32", func(m map[string][]float32, s map[string][]int64, c map[string]any) { delete(m, q) },
			[]string{"model.safetensors", "missing tensor", q}},
		{"wrong shape", "F32", func(m map[string][]float32, s map[string][]int64, c map[string]any) { s[q] = []int64{4, 16} },
			[]string{"model.safetensors", q, "[4 16]"}},
		{"config disagrees", "F32", func(m map[string][]float32, s map[string][]int64, c map[string]any) { c["intermediate_size"] = 32 },
			[]string{"intermediate.dense.weight", "shape"}},
		{"no BERT tensors", "F32", func(m map[string][]float32, s map[string][]int64, c map[string]any) {
			delete(m, "embeddings.word_embeddings.weight")
		}, []string{"not a BERT checkpoint"}},
		{"integer dtype", "I32", nil, []string{"dtype I32"}},
		{"past fp16", "F32", func(m map[string][]float32, s map[string][]int64, c map[string]any) { m[q][5] = 1e6 },
			[]string{"model.safetensors", q, "index 5", "fp16"}},
		{"roberta", "F32", func(m map[string][]float32, s map[string][]int64, c map[string]any) { c["model_type"] = "roberta" },
			[]string{"config.json", "roberta"}},
		{"relu", "F32", func(m map[string][]float32, s map[string][]int64, c map[string]any) { c["hidden_act"] = "relu" },
			[]string{"config.json", "relu"}},
		{"heads", "F32", func(m map[string][]float32, s map[string][]int64, c map[string]any) { c["num_attention_heads"] = 3 },
			[]string{"config.json", "multiple"}},
		{"architecture", "F32", func(m map[string][]float32, s map[string][]int64, c map[string]any) {
			c["architectures"] = []string{"GPT2Model"}
		}, []string{"config.json", "GPT2Model"}},
	} {
		dir := writeTinyModel(t, w, "", tc.dtype, tc.edit)
		_, err := Load(dir, Options{})
		if err == nil {
			t.Errorf("%s: Load succeeded", tc.name)
			continue
		}
		for _, s := range tc.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q does not mention %q", tc.name, err, s)
			}
		}
	}
	dir := writeTinyModel(t, w, "", "F32", nil)
	os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("garbage!garbage!"), 0o644)
	if _, err := Load(dir, Options{}); err == nil || !strings.Contains(err.Error(), "model.safetensors") {
		t.Errorf("garbage checkpoint: err = %v", err)
	}
	os.Remove(filepath.Join(dir, "config.json"))
	if _, err := Load(dir, Options{}); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("missing config: err = %v", err)
	}
	if _, err := Load(writeTinyModel(t, w, "", "F32", nil), Options{MaxLength: 65}); err == nil {
		t.Error("max length past max_position_embeddings accepted")
	}
}

// TestConcurrentEncode runs callers in parallel: results must equal the serial ones.
func TestConcurrentEncode(t *testing.T) {
	e, err := Load(writeTinyModel(t, tinyWeights(t, 9), "", "F32", nil), Options{BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := e.Encode(tinyTexts, "query: ")
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			got, err := e.Encode(tinyTexts, "query: ")
			if err == nil && !equal(got, want) {
				err = fmt.Errorf("concurrent result differs")
			}
			errs <- err
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestSplitBatches(t *testing.T) {
	e := &Encoder{opt: Options{BatchSize: 3, MaxBatchTokens: 10}}
	lens := []int{2, 2, 2, 2, 5, 5, 12, 1}
	seqs := make([][]int32, len(lens))
	order := make([]int, len(lens))
	for i, n := range lens {
		seqs[i], order[i] = make([]int32, n), i
	}
	got := fmt.Sprint(e.splitBatches(seqs, order))
	if want := "[[0 1 2] [3 4] [5] [6] [7]]"; got != want {
		t.Errorf("batches %s, want %s", got, want)
	}
}
