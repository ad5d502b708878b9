// Package crossenc writes a small cross-encoder model folder for tests (encoder/rerank's
// parity test, the server's rerank tests): MiniLM-L6's real encoder under a fixed head.
package crossenc

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"needle/internal/half"
	"needle/safetensors"
	"needle/testkit/testenv"
)

// Model writes a BertForSequenceClassification folder of MiniLM-L6's real encoder (its
// Linear weights rounded to fp16, what needle's encoder multiplies by, so that both sides
// hold the same weights) and a fixed classifier head, with activation act ("" for none in
// config.json). bench/crossencoder_golden.py scores encoder/rerank/testdata's pairs on the folder this
// writes with sentence-transformers' CrossEncoder.predict (testdata/golden_scores.json).
func Model(t testing.TB, out, act string) {
	t.Helper()
	src := testenv.MiniLMDir(t)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err == nil {
			err = os.WriteFile(filepath.Join(out, name), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var cfg map[string]any
	b, _ := os.ReadFile(filepath.Join(src, "config.json"))
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["architectures"] = []string{"BertForSequenceClassification"}
	cfg["id2label"] = map[string]string{"0": "LABEL_0"}
	cfg["label2id"] = map[string]int{"LABEL_0": 0}
	if act != "" {
		cfg["sbert_ce_default_activation_function"] = act
	}
	b, _ = json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type tensor struct {
		name  string
		data  []float32
		shape []int64
	}
	var ts []tensor
	for _, x := range f.Tensors() {
		if x.Name == "embeddings.position_ids" {
			continue
		}
		data, err := f.Float32(x.Name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(x.Name, "encoder.") && strings.HasSuffix(x.Name, ".weight") && len(x.Shape) == 2 {
			for i, v := range data {
				data[i] = half.ToFloat32(half.FromFloat32(v)) // as the encoder stores them
			}
		}
		ts = append(ts, tensor{"bert." + x.Name, data, x.Shape})
	}
	H := int64(384)
	head := make([]float32, H)
	for i := range head {
		head[i] = float32(math.Sin(float64(i)*0.37)) * 0.3
	}
	ts = append(ts, tensor{"classifier.weight", head, []int64{1, H}}, tensor{"classifier.bias", []float32{0.1}, []int64{1}})
	infos := make([]safetensors.Tensor, len(ts))
	for i, x := range ts {
		infos[i] = safetensors.Tensor{Name: x.name, DType: "F32", Shape: x.shape}
	}
	w, err := safetensors.Create(filepath.Join(out, "model.safetensors"), infos, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ts {
		buf := make([]byte, 4*len(x.data))
		for i, v := range x.data {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		if err := w.WriteTensor(x.name, buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
