package bert

import (
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"

	"needle/cuda"
	"needle/kernels/bert/nn"
	"needle/safetensors"
)

// weights are the parameters of a BertModel (pooler excluded: sentence embeddings pool the
// last hidden state). The Linear matrices are held in the encoder's precision (see linear),
// the rest as fp32. Immutable after load; shared by concurrent forward passes.
type weights struct {
	word, pos, type0  []float32 // [vocab,H] ([2 vocab,H] with Options.SegmentB), [positions,H], [H] (token type 0)
	type1             []float32 // [H] (token type 1; nil when the model has one token type)
	embGamma, embBeta []float32
	layers            []layerWeights
}

// layerWeights: matrices [out, in] (PyTorch's Linear layout).
type layerWeights struct {
	qkv                             linear    // query | key | value stacked: [3H, H]
	attnOut, ffnIn, ffnOut          linear    // [H, H], [I, H], [H, I]
	qkvB, attnOutB, ffnInB, ffnOutB []float32 // [3H], [H], [I], [H]
	ln1Gamma, ln1Beta               []float32
	ln2Gamma, ln2Beta               []float32
}

// linear is one Linear matrix in one precision: fp16 panels (nn.PackHalf: half the bytes a
// query streams, and half the RSS; the golden test bounds the rounding), int8 per output
// channel (nn.PackInt8) when q8 is set, bf16 (nn.PackBF16) when bf is set, or fp16 [out, in]
// on a GPU (a cuBLAS operand) when dev is set.
type linear struct {
	half    []uint16
	q8      *nn.Int8Matrix
	bf      *nn.BF16Matrix
	dev     *cuda.Buffer
	out, in int
}

// packer turns fp32 [out, in] matrices into linears: on the host in prec, or on gpu's device.
type packer struct {
	ops  nn.Ops
	prec Precision
	gpu  *gpuModel // nil: CPU
}

// pack packs w[out,in]; an fp16 value out of range is a *nn.HalfRangeError (CPU; the GPU's
// conversion rounds it to inf, which the parity test would show).
func (p packer) pack(w []float32, out, in int) (linear, error) {
	l := linear{out: out, in: in}
	var err error
	switch {
	case p.gpu != nil:
		l.dev, err = p.gpu.uploadHalf(w[:out*in])
	case p.prec == Int8:
		l.q8, err = nn.PackInt8(w, out, in)
	case p.prec == BF16:
		l.bf, err = nn.PackBF16(w, out, in)
	default:
		l.half = make([]uint16, nn.PackedLen(out, in))
		err = p.ops.PackHalf(l.half, w, out, in)
	}
	return l, err
}

// apply computes y[rows,out] = act(x[rows,in] * w^T + b).
func (l linear) apply(o nn.Ops, y, x, b []float32, rows int, act nn.Act) error {
	switch {
	case l.q8 != nil:
		return o.LinearInt8(y, x, l.q8, b, rows, act)
	case l.bf != nil:
		return o.LinearBF16(y, x, l.bf, b, rows, act)
	}
	return o.Linear(y, x, l.half, b, rows, l.in, l.out, act)
}

func (l linear) bytes() int64 {
	if l.q8 != nil {
		return l.q8.Bytes()
	}
	if l.bf != nil {
		return l.bf.Bytes()
	}
	if l.dev != nil {
		return 2 * int64(l.out*l.in)
	}
	return 2 * int64(len(l.half))
}

// tensorReader reads named tensors of one safetensors file, checking shapes, with or
// without the "bert." prefix.
type tensorReader struct {
	f       *safetensors.File
	prefix  string
	p       packer    // of the Linear matrices
	scratch []float32 // fp32 staging of getPacked
}

func newTensorReader(f *safetensors.File, p packer) (*tensorReader, error) {
	r := &tensorReader{f: f, p: p}
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
// become one [3H, H] matrix) and packs them in r.prec. The fp32 values pass through
// r.scratch, reused for every matrix, so loading leaves no fp32 copies to collect.
func (r *tensorReader) getPacked(rows, in int64, names ...string) (linear, error) {
	n := int(rows * in)
	r.scratch = grow(r.scratch, len(names)*n)
	for k, name := range names {
		full, err := r.check(name, rows, in)
		if err != nil {
			return linear{}, err
		}
		if err := r.f.Float32Into(r.scratch[k*n:(k+1)*n], full); err != nil {
			return linear{}, err
		}
	}
	packed, err := r.p.pack(r.scratch, len(names)*int(rows), int(in))
	var bad *nn.HalfRangeError
	var nonFinite *nn.NonFiniteError
	switch {
	case errors.As(err, &bad):
		return linear{}, fmt.Errorf("%s: tensor %q: value %g at index %d is outside the fp16 range (|x| < 65520) in which needle holds weights",
			r.f.Path(), r.prefix+names[bad.Index/n], bad.Value, bad.Index%n)
	case errors.As(err, &nonFinite):
		return linear{}, fmt.Errorf("%s: tensor %q: value %g at index %d is not finite",
			r.f.Path(), r.prefix+names[nonFinite.Index/n], nonFinite.Value, nonFinite.Index%n)
	}
	return packed, err
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

// loadWeights reads dir/model.safetensors for the shape cfg, Linear matrices packed by p.
func loadWeights(dir string, cfg Config, p packer) (*weights, error) {
	f, err := safetensors.Open(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return nil, err
	}
	defer f.Close() // every tensor is copied (fp32 or fp16) below
	r, err := newTensorReader(f, p)
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
	if cfg.TypeVocabSize > 1 {
		w.type1 = types[H : 2*H]
	}
	for l := 0; l < cfg.Layers; l++ {
		var lw layerWeights
		var qb, kb, vb []float32
		p := fmt.Sprintf("encoder.layer.%d.", l)
		var err error
		if lw.qkv, err = r.getPacked(H, H, p+"attention.self.query.weight", p+"attention.self.key.weight", p+"attention.self.value.weight"); err != nil {
			return nil, err
		}
		if lw.attnOut, err = r.getPacked(H, H, p+"attention.output.dense.weight"); err != nil {
			return nil, err
		}
		if lw.ffnIn, err = r.getPacked(I, H, p+"intermediate.dense.weight"); err != nil {
			return nil, err
		}
		if lw.ffnOut, err = r.getPacked(H, I, p+"output.dense.weight"); err != nil {
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
func randomWeights(cfg Config, seed int64, p packer) (*weights, error) {
	rng := rand.New(rand.NewSource(seed))
	normal := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 0.02)
		}
		return x
	}
	var scratch []float32 // fp32 staging of every matrix, so no fp32 copies are left to collect
	var err error         // the first packing error (a GPU upload; N(0, 0.02) is inside the fp16 range)
	packed := func(out, in int) linear {
		scratch = grow(scratch, out*in)
		for i := range scratch {
			scratch[i] = float32(rng.NormFloat64() * 0.02)
		}
		l, e := p.pack(scratch, out, in)
		err = errors.Join(err, e)
		return l
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
			qkv: packed(3*H, H), qkvB: normal(3 * H), attnOut: packed(H, H), attnOutB: normal(H),
			ln1Gamma: ones(H), ln1Beta: make([]float32, H), ffnIn: packed(I, H), ffnInB: normal(I),
			ffnOut: packed(H, I), ffnOutB: normal(H), ln2Gamma: ones(H), ln2Beta: make([]float32, H)})
	}
	return w, err
}

// bytes is the size of the weights in memory (what RSS must hold): matrices in their precision, fp32 the rest.
func (w *weights) bytes() int64 {
	n := 4 * (len(w.word) + len(w.pos) + len(w.type0) + len(w.embGamma) + len(w.embBeta))
	for _, l := range w.layers {
		for _, x := range [][]float32{l.qkvB, l.attnOutB, l.ln1Gamma, l.ln1Beta, l.ffnInB, l.ffnOutB, l.ln2Gamma, l.ln2Beta} {
			n += 4 * len(x)
		}
	}
	m := int64(n)
	for _, l := range w.layers {
		m += l.qkv.bytes() + l.attnOut.bytes() + l.ffnIn.bytes() + l.ffnOut.bytes()
	}
	return m
}
