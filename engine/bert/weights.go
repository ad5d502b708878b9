package bert

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"

	"needle/safetensors"
)

// weights are the fp32 parameters of a BertModel (pooler excluded: sentence embeddings
// pool the last hidden state). Immutable after load; shared by concurrent forward passes.
type weights struct {
	word, pos, type0  []float32 // [vocab,H], [positions,H], [H] (token type 0)
	embGamma, embBeta []float32
	layers            []layerWeights
}

// layerWeights: matrices in PyTorch Linear layout [out, in].
type layerWeights struct {
	qkvW, qkvB         []float32 // query | key | value stacked: [3H, H], [3H]
	attnOutW, attnOutB []float32 // [H, H], [H]
	ln1Gamma, ln1Beta  []float32
	ffnInW, ffnInB     []float32 // [I, H], [I]
	ffnOutW, ffnOutB   []float32 // [H, I], [H]
	ln2Gamma, ln2Beta  []float32
}

// tensorReader reads named tensors of one safetensors file, checking shapes, with or
// without the "bert." prefix.
type tensorReader struct {
	f      *safetensors.File
	prefix string
}

func newTensorReader(f *safetensors.File) (*tensorReader, error) {
	r := &tensorReader{f: f}
	const probe = "embeddings.word_embeddings.weight"
	if _, ok := f.Tensor(probe); !ok {
		if _, ok := f.Tensor("bert." + probe); !ok {
			return nil, fmt.Errorf("%s: no tensor %q (with or without the bert. prefix): not a BERT checkpoint", f.Path(), probe)
		}
		r.prefix = "bert."
	}
	return r, nil
}

// get returns tensor name (under the checkpoint's prefix) as fp32, checking its shape.
func (r *tensorReader) get(name string, shape ...int64) ([]float32, error) {
	full := r.prefix + name
	t, ok := r.f.Tensor(full)
	if !ok {
		return nil, fmt.Errorf("%s: missing tensor %q", r.f.Path(), full)
	}
	if !slices.Equal(t.Shape, shape) {
		return nil, fmt.Errorf("%s: tensor %q has shape %v, config.json implies %v", r.f.Path(), full, t.Shape, shape)
	}
	return r.f.Float32(full)
}

// getAll reads several tensors in order, stopping at the first error.
func (r *tensorReader) getAll(dst []*[]float32, names []string, shapes [][]int64) error {
	for i, name := range names {
		x, err := r.get(name, shapes[i]...)
		if err != nil {
			return err
		}
		*dst[i] = x
	}
	return nil
}

// loadWeights reads dir/model.safetensors for the shape cfg.
func loadWeights(dir string, cfg Config) (*weights, error) {
	f, err := safetensors.Open(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return nil, err
	}
	defer f.Close() // every tensor is copied to fp32 below
	r, err := newTensorReader(f)
	if err != nil {
		return nil, err
	}
	H, I := int64(cfg.Hidden), int64(cfg.Intermediate)
	w := &weights{}
	var types []float32
	if err := r.getAll([]*[]float32{&w.word, &w.pos, &types, &w.embGamma, &w.embBeta},
		[]string{"embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
			"embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias"},
		[][]int64{{int64(cfg.VocabSize), H}, {int64(cfg.MaxPositions), H}, {int64(cfg.TypeVocabSize), H}, {H}, {H}}); err != nil {
		return nil, err
	}
	w.type0 = types[:H]
	for l := 0; l < cfg.Layers; l++ {
		var lw layerWeights
		var q, k, v, qb, kb, vb []float32
		p := fmt.Sprintf("encoder.layer.%d.", l)
		names := []string{"attention.self.query.weight", "attention.self.key.weight", "attention.self.value.weight",
			"attention.self.query.bias", "attention.self.key.bias", "attention.self.value.bias",
			"attention.output.dense.weight", "attention.output.dense.bias",
			"attention.output.LayerNorm.weight", "attention.output.LayerNorm.bias",
			"intermediate.dense.weight", "intermediate.dense.bias", "output.dense.weight", "output.dense.bias",
			"output.LayerNorm.weight", "output.LayerNorm.bias"}
		for i := range names {
			names[i] = p + names[i]
		}
		if err := r.getAll([]*[]float32{&q, &k, &v, &qb, &kb, &vb, &lw.attnOutW, &lw.attnOutB, &lw.ln1Gamma, &lw.ln1Beta,
			&lw.ffnInW, &lw.ffnInB, &lw.ffnOutW, &lw.ffnOutB, &lw.ln2Gamma, &lw.ln2Beta}, names,
			[][]int64{{H, H}, {H, H}, {H, H}, {H}, {H}, {H}, {H, H}, {H}, {H}, {H}, {I, H}, {I}, {H, I}, {H}, {H}, {H}}); err != nil {
			return nil, err
		}
		lw.qkvW = slices.Concat(q, k, v)
		lw.qkvB = slices.Concat(qb, kb, vb)
		w.layers = append(w.layers, lw)
	}
	return w, nil
}

// randomWeights are seeded N(0, 0.02) matrices with unit LayerNorms: a model of cfg's shape
// whose cost equals a real one's, for benchmarks of checkpoints we cannot download.
func randomWeights(cfg Config, seed int64) *weights {
	rng := rand.New(rand.NewSource(seed))
	normal := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 0.02)
		}
		return x
	}
	ones := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = 1
		}
		return x
	}
	H, I := cfg.Hidden, cfg.Intermediate
	w := &weights{word: normal(cfg.VocabSize * H), pos: normal(cfg.MaxPositions * H), type0: normal(H),
		embGamma: ones(H), embBeta: make([]float32, H)}
	for l := 0; l < cfg.Layers; l++ {
		w.layers = append(w.layers, layerWeights{
			qkvW: normal(3 * H * H), qkvB: normal(3 * H), attnOutW: normal(H * H), attnOutB: normal(H),
			ln1Gamma: ones(H), ln1Beta: make([]float32, H), ffnInW: normal(I * H), ffnInB: normal(I),
			ffnOutW: normal(H * I), ffnOutB: normal(H), ln2Gamma: ones(H), ln2Beta: make([]float32, H)})
	}
	return w
}

// bytes is the fp32 size of the weights (what RSS must hold).
func (w *weights) bytes() int64 {
	n := len(w.word) + len(w.pos) + len(w.type0) + len(w.embGamma) + len(w.embBeta)
	for _, l := range w.layers {
		for _, x := range [][]float32{l.qkvW, l.qkvB, l.attnOutW, l.attnOutB, l.ln1Gamma, l.ln1Beta,
			l.ffnInW, l.ffnInB, l.ffnOutW, l.ffnOutB, l.ln2Gamma, l.ln2Beta} {
			n += len(x)
		}
	}
	return 4 * int64(n)
}
