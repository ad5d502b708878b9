package bert

import (
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"

	"needle/kernels/retrieval/nn"
	"needle/safetensors"
)

// weights are the parameters of a BertModel (pooler excluded: sentence embeddings pool the
// last hidden state). The Linear matrices are held as fp16 (nn.Linear's format: half the
// bytes a query streams, and half the RSS; the golden test bounds the rounding), the rest
// as fp32. Immutable after load; shared by concurrent forward passes.
type weights struct {
	word, pos, type0  []float32 // [vocab,H], [positions,H], [H] (token type 0)
	embGamma, embBeta []float32
	layers            []layerWeights
}

// layerWeights: matrices [out, in] (PyTorch's Linear layout) packed as fp16 by nn.PackHalf.
type layerWeights struct {
	qkvW                            []uint16  // query | key | value stacked: [3H, H]
	attnOutW, ffnInW, ffnOutW       []uint16  // [H, H], [I, H], [H, I]
	qkvB, attnOutB, ffnInB, ffnOutB []float32 // [3H], [H], [I], [H]
	ln1Gamma, ln1Beta               []float32
	ln2Gamma, ln2Beta               []float32
}

// tensorReader reads named tensors of one safetensors file, checking shapes, with or
// without the "bert." prefix.
type tensorReader struct {
	f       *safetensors.File
	prefix  string
	ops     nn.Ops    // converts matrices to fp16
	scratch []float32 // fp32 staging of getPacked
}

func newTensorReader(f *safetensors.File, ops nn.Ops) (*tensorReader, error) {
	r := &tensorReader{f: f, ops: ops}
	const probe = "embeddings.word_embeddings.weight"
	if _, ok := f.Tensor(probe); !ok {
		if _, ok := f.Tensor("bert." + probe); !ok {
			return nil, fmt.Errorf("%s: no tensor %q (with or without the bert. prefix): not a BERT checkpoint", f.Path(), probe)
		}
		r.prefix = "bert."
	}
	return r, nil
}

// check returns the full name of tensor name (under the checkpoint's prefix), checking its shape.
func (r *tensorReader) check(name string, shape ...int64) (string, error) {
	full := r.prefix + name
	t, ok := r.f.Tensor(full)
	if !ok {
		return "", fmt.Errorf("%s: missing tensor %q", r.f.Path(), full)
	}
	if !slices.Equal(t.Shape, shape) {
		return "", fmt.Errorf("%s: tensor %q has shape %v, config.json implies %v", r.f.Path(), full, t.Shape, shape)
	}
	return full, nil
}

// get returns tensor name as fp32, checking its shape.
func (r *tensorReader) get(name string, shape ...int64) ([]float32, error) {
	full, err := r.check(name, shape...)
	if err != nil {
		return nil, err
	}
	return r.f.Float32(full)
}

// getPacked reads the [rows, in] tensors names, stacks them along the output axis (Q, K and V
// become one [3H, H] matrix) and packs them as fp16 for nn.Linear. The fp32 values pass
// through r.scratch, reused for every matrix, so loading leaves no fp32 copies to collect.
func (r *tensorReader) getPacked(rows, in int64, names ...string) ([]uint16, error) {
	n := int(rows * in)
	r.scratch = grow(r.scratch, len(names)*n)
	for k, name := range names {
		full, err := r.check(name, rows, in)
		if err != nil {
			return nil, err
		}
		if err := r.f.Float32Into(r.scratch[k*n:(k+1)*n], full); err != nil {
			return nil, err
		}
	}
	out := len(names) * int(rows)
	packed := make([]uint16, nn.PackedLen(out, int(in)))
	var bad *nn.HalfRangeError
	if err := r.ops.PackHalf(packed, r.scratch, out, int(in)); errors.As(err, &bad) {
		return nil, fmt.Errorf("%s: tensor %q: value %g at index %d is outside the fp16 range (|x| < 65520) in which needle holds weights",
			r.f.Path(), r.prefix+names[bad.Index/n], bad.Value, bad.Index%n)
	} else if err != nil {
		return nil, err
	}
	return packed, nil
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
func loadWeights(dir string, cfg Config, ops nn.Ops) (*weights, error) {
	f, err := safetensors.Open(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return nil, err
	}
	defer f.Close() // every tensor is copied (fp32 or fp16) below
	r, err := newTensorReader(f, ops)
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
		var qb, kb, vb []float32
		p := fmt.Sprintf("encoder.layer.%d.", l)
		var err error
		if lw.qkvW, err = r.getPacked(H, H, p+"attention.self.query.weight", p+"attention.self.key.weight", p+"attention.self.value.weight"); err != nil {
			return nil, err
		}
		if lw.attnOutW, err = r.getPacked(H, H, p+"attention.output.dense.weight"); err != nil {
			return nil, err
		}
		if lw.ffnInW, err = r.getPacked(I, H, p+"intermediate.dense.weight"); err != nil {
			return nil, err
		}
		if lw.ffnOutW, err = r.getPacked(H, I, p+"output.dense.weight"); err != nil {
			return nil, err
		}
		names := []string{"attention.self.query.bias", "attention.self.key.bias", "attention.self.value.bias",
			"attention.output.dense.bias", "attention.output.LayerNorm.weight", "attention.output.LayerNorm.bias",
			"intermediate.dense.bias", "output.dense.bias", "output.LayerNorm.weight", "output.LayerNorm.bias"}
		for i := range names {
			names[i] = p + names[i]
		}
		if err := r.getAll([]*[]float32{&qb, &kb, &vb, &lw.attnOutB, &lw.ln1Gamma, &lw.ln1Beta,
			&lw.ffnInB, &lw.ffnOutB, &lw.ln2Gamma, &lw.ln2Beta}, names,
			[][]int64{{H}, {H}, {H}, {H}, {H}, {H}, {I}, {H}, {H}, {H}}); err != nil {
			return nil, err
		}
		lw.qkvB = slices.Concat(qb, kb, vb)
		w.layers = append(w.layers, lw)
	}
	return w, nil
}

// randomWeights are seeded N(0, 0.02) matrices with unit LayerNorms: a model of cfg's shape
// whose cost equals a real one's, for benchmarks of checkpoints we cannot download.
func randomWeights(cfg Config, seed int64, ops nn.Ops) *weights {
	rng := rand.New(rand.NewSource(seed))
	normal := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 0.02)
		}
		return x
	}
	var scratch []float32 // fp32 staging of every matrix, so no fp32 copies are left to collect
	packed := func(out, in int) []uint16 {
		scratch = grow(scratch, out*in)
		for i := range scratch {
			scratch[i] = float32(rng.NormFloat64() * 0.02)
		}
		h := make([]uint16, nn.PackedLen(out, in))
		if err := ops.PackHalf(h, scratch, out, in); err != nil {
			panic(err) // N(0, 0.02) is far inside the fp16 range
		}
		return h
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
			qkvW: packed(3*H, H), qkvB: normal(3 * H), attnOutW: packed(H, H), attnOutB: normal(H),
			ln1Gamma: ones(H), ln1Beta: make([]float32, H), ffnInW: packed(I, H), ffnInB: normal(I),
			ffnOutW: packed(H, I), ffnOutB: normal(H), ln2Gamma: ones(H), ln2Beta: make([]float32, H)})
	}
	return w
}

// bytes is the size of the weights in memory (what RSS must hold): fp16 matrices, fp32 the rest.
func (w *weights) bytes() int64 {
	n := 4 * (len(w.word) + len(w.pos) + len(w.type0) + len(w.embGamma) + len(w.embBeta))
	for _, l := range w.layers {
		for _, x := range [][]float32{l.qkvB, l.attnOutB, l.ln1Gamma, l.ln1Beta, l.ffnInB, l.ffnOutB, l.ln2Gamma, l.ln2Beta} {
			n += 4 * len(x)
		}
		n += 2 * (len(l.qkvW) + len(l.attnOutW) + len(l.ffnInW) + len(l.ffnOutW))
	}
	return int64(n)
}
