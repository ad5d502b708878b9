package bert

// The forward pass on a GPU: the Linears are cuBLAS GEMMs (fp16 operands, fp32 accumulation
// and output), everything between them is a kernel of package nngpu, and the residual stream
// stays fp32 as on the CPU, so the GPU's embeddings follow the CPU encoder's to fp16 rounding
// of the GEMM operands (the parity test: cosine >= 0.9999). Sequences stay packed as on the
// CPU: no padding work. Tokenization, sorting and batching are Encode's, shared with the CPU.

import (
	"errors"
	"fmt"
	"log"
	"sync"
	"unsafe"

	"needle/cuda"
	"needle/kernels/bert/nn"
	"needle/kernels/bert/nngpu"
)

// gpuModel is an encoder's weights on one GPU (the Linear matrices are in weights.layers as
// linear.dev; the vectors here), its kernels, and the activations of one forward pass,
// reserved for the largest batch so far. Forward passes take turns (mu).
type gpuModel struct {
	dev  *cuda.Device
	blas *cuda.BLAS
	k    *nngpu.Kernels
	cfg  Config

	word, pos, type0, embGamma, embBeta *cuda.Buffer
	layers                              []gpuLayer
	weights                             []*cuda.Buffer // every weight buffer, freed by close
	stage                               *cuda.Buffer   // fp32 staging of uploadHalf

	mu     sync.Mutex
	act    []*cuda.Buffer // x, xh, y, h, ids, pos, start, pooled (reserve)
	tokens int            // tokens and sequences act holds
	seqs   int
	// budget caps the activation bytes (0: the device's free memory less a margin); tests
	// set it to make batches split.
	budget uint64
}

// gpuLayer is a layer's vectors on the device.
type gpuLayer struct {
	qkvB, attnOutB, ffnInB, ffnOutB *cuda.Buffer
	ln1Gamma, ln1Beta               *cuda.Buffer
	ln2Gamma, ln2Beta               *cuda.Buffer
}

// newGPUModel loads the kernels and a cuBLAS handle on dev for a model of shape cfg.
func newGPUModel(dev *cuda.Device, cfg Config) (*gpuModel, error) {
	if hd := cfg.Hidden / cfg.Heads; !nngpu.HeadDimSupported(hd) {
		return nil, fmt.Errorf("GPU encoder: head dim %d (hidden_size/num_attention_heads) is not supported; the GPU kernels take 32 and 64", hd)
	}
	if cfg.Hidden > nngpu.MaxHidden {
		return nil, fmt.Errorf("GPU encoder: hidden_size %d is over the kernels' %d", cfg.Hidden, nngpu.MaxHidden)
	}
	k, err := nngpu.Load(dev)
	if err != nil {
		return nil, err
	}
	blas, err := dev.NewBLAS()
	if err != nil {
		return nil, errors.Join(err, k.Close())
	}
	return &gpuModel{dev: dev, blas: blas, k: k, cfg: cfg}, nil
}

// alloc reserves a weight buffer (freed by close).
func (g *gpuModel) alloc(n int) (*cuda.Buffer, error) {
	b, err := g.dev.Alloc(n)
	if err != nil {
		return nil, err
	}
	g.weights = append(g.weights, b)
	return b, nil
}

// uploadFloats copies x to a new weight buffer.
func (g *gpuModel) uploadFloats(x []float32) (*cuda.Buffer, error) {
	b, err := g.alloc(4 * len(x))
	if err != nil || len(x) == 0 {
		return b, err
	}
	return b, b.Upload(unsafe.Pointer(&x[0]), 4*len(x))
}

// uploadHalf copies the fp32 matrix w to the device through the staging buffer and converts
// it there to a new fp16 weight buffer.
func (g *gpuModel) uploadHalf(w []float32) (*cuda.Buffer, error) {
	if g.stage == nil || g.stage.Size() < 4*len(w) {
		if g.stage != nil {
			if err := g.stage.Free(); err != nil {
				return nil, err
			}
		}
		var err error
		if g.stage, err = g.dev.Alloc(4 * len(w)); err != nil {
			g.stage = nil
			return nil, err
		}
	}
	if err := g.stage.Upload(unsafe.Pointer(&w[0]), 4*len(w)); err != nil {
		return nil, err
	}
	b, err := g.alloc(2 * len(w))
	if err != nil {
		return nil, err
	}
	return b, g.k.ToHalf(b, g.stage, len(w))
}

// uploadVectors copies the embeddings, biases and LayerNorms of w to the device (fp32) and
// drops their host copies (the CPU forward pass never runs for this encoder).
func (g *gpuModel) uploadVectors(w *weights) error {
	type vec struct {
		dst **cuda.Buffer
		src *[]float32
	}
	vecs := []vec{{&g.word, &w.word}, {&g.pos, &w.pos}, {&g.type0, &w.type0}, {&g.embGamma, &w.embGamma}, {&g.embBeta, &w.embBeta}}
	g.layers = make([]gpuLayer, len(w.layers))
	for i := range w.layers {
		l, d := &w.layers[i], &g.layers[i]
		vecs = append(vecs, vec{&d.qkvB, &l.qkvB}, vec{&d.attnOutB, &l.attnOutB}, vec{&d.ffnInB, &l.ffnInB},
			vec{&d.ffnOutB, &l.ffnOutB}, vec{&d.ln1Gamma, &l.ln1Gamma}, vec{&d.ln1Beta, &l.ln1Beta},
			vec{&d.ln2Gamma, &l.ln2Gamma}, vec{&d.ln2Beta, &l.ln2Beta})
	}
	for _, v := range vecs {
		var err error
		if *v.dst, err = g.uploadFloats(*v.src); err != nil {
			return err
		}
		*v.src = nil
	}
	if g.stage != nil {
		err := g.stage.Free()
		g.stage = nil
		return err
	}
	return nil
}

// close frees every device buffer, the kernels and the cuBLAS handle.
func (g *gpuModel) close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	var errs []error
	for _, b := range append(append(g.weights, g.act...), g.stage) {
		if b != nil {
			errs = append(errs, b.Free())
		}
	}
	g.weights, g.act, g.stage = nil, nil, nil
	return errors.Join(append(errs, g.k.Close(), g.blas.Destroy())...)
}

// activationSizes are the byte sizes of reserve's buffers for tokens and seqs.
func activationSizes(cfg Config, tokens, seqs int) []int {
	H, I := cfg.Hidden, cfg.Intermediate
	return []int{
		4 * tokens * H,           // x: the residual stream, fp32
		2 * tokens * H,           // xh: x in fp16, the next GEMM's operand
		4 * tokens * max(3*H, I), // y: GEMM outputs, fp32
		2 * tokens * max(H, I),   // h: attention context or GELU output, fp16
		4 * tokens, 4 * tokens,   // ids, positions
		4 * (seqs + 1), 4 * seqs * H, // start, pooled
	}
}

// errNoRoom says a batch's activations do not fit the GPU's free memory (or budget).
var errNoRoom = errors.New("not enough free GPU memory")

// reserve makes act hold a batch of tokens and seqs, or returns an error wrapping errNoRoom
// (checked against free memory first: a failed allocation would leave the device unhealthy).
func (g *gpuModel) reserve(tokens, seqs int) error {
	if tokens <= g.tokens && seqs <= g.seqs {
		return nil
	}
	tokens, seqs = max(tokens, g.tokens), max(seqs, g.seqs)
	for _, b := range g.act {
		if err := b.Free(); err != nil {
			return err
		}
	}
	g.act, g.tokens, g.seqs = nil, 0, 0
	sizes := activationSizes(g.cfg, tokens, seqs)
	need := uint64(0)
	for _, n := range sizes {
		need += uint64(n)
	}
	room := g.budget
	if room == 0 {
		free, _, err := g.dev.MemInfo()
		if err != nil {
			return err
		}
		const margin = 512 << 20 // cuBLAS workspace and the driver's own
		room = free - min(free, margin)
	}
	if need > room {
		return fmt.Errorf("%w: the activations of %d tokens in %d texts need %d MiB, %d MiB are free", errNoRoom, tokens, seqs, need>>20, room>>20)
	}
	for _, n := range sizes {
		b, err := g.dev.Alloc(n)
		if err != nil {
			return err
		}
		g.act = append(g.act, b)
	}
	g.tokens, g.seqs = tokens, seqs
	return nil
}

// encode runs the forward pass of seqs[batch[i]] into out[batch[i]*H:]. A batch whose
// activations do not fit is split in two (the reason logged), down to single texts.
func (g *gpuModel) encode(e *Encoder, seqs [][]int32, batch []int, out []float32) error {
	err := g.forward(e, seqs, batch, out)
	if errors.Is(err, errNoRoom) && len(batch) > 1 {
		log.Printf("bert: GPU batch of %d texts split in two: %v", len(batch), err)
		half := len(batch) / 2
		return errors.Join(g.encode(e, seqs, batch[:half], out), g.encode(e, seqs, batch[half:], out))
	}
	return err
}

func (g *gpuModel) forward(e *Encoder, seqs [][]int32, batch []int, out []float32) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	ids, pos, start := packBatch(nil, nil, nil, seqs, batch)
	T, S, maxLen := len(ids), len(batch), 0
	for _, b := range batch {
		maxLen = max(maxLen, len(seqs[b]))
	}
	if err := g.reserve(T, S); err != nil {
		return err
	}
	x, xh, y, h, dIDs, dPos, dStart, pooled := g.act[0], g.act[1], g.act[2], g.act[3], g.act[4], g.act[5], g.act[6], g.act[7]
	c := e.cfg
	H, I, eps, k := c.Hidden, c.Intermediate, c.Eps, g.k
	err := firstErr(
		dIDs.Upload(unsafe.Pointer(&ids[0]), 4*T),
		dPos.Upload(unsafe.Pointer(&pos[0]), 4*T),
		dStart.Upload(unsafe.Pointer(&start[0]), 4*(S+1)))
	if err != nil {
		return err
	}
	if err := k.EmbedLayerNorm(x, xh, dIDs, dPos, g.word, g.pos, g.type0, g.embGamma, g.embBeta, T, H, eps); err != nil {
		return err
	}
	for i, l := range e.w.layers {
		d := g.layers[i]
		// Each step runs only if the ones before it succeeded: a failed call leaves the
		// device unhealthy, and the later ones would only repeat its error.
		steps := []func() error{
			func() error { return g.gemm(y, xh, l.qkv, T) },
			func() error { return k.Attention(h, y, d.qkvB, dStart, S, maxLen, c.Heads, H/c.Heads) },
			func() error { return g.gemm(y, h, l.attnOut, T) },
			func() error { return k.AddLayerNorm(x, xh, y, d.attnOutB, d.ln1Gamma, d.ln1Beta, T, H, eps) },
			func() error { return g.gemm(y, xh, l.ffnIn, T) },
			func() error { return k.BiasGELU(h, y, d.ffnInB, T, I) },
			func() error { return g.gemm(y, h, l.ffnOut, T) },
			func() error { return k.AddLayerNorm(x, xh, y, d.ffnOutB, d.ln2Gamma, d.ln2Beta, T, H, eps) },
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return err
			}
		}
	}
	if err := k.Pool(pooled, x, dStart, S, H, e.pooling == nn.CLSPool, !e.opt.SkipNormalize); err != nil {
		return err
	}
	host := make([]float32, S*H)
	if err := pooled.Download(unsafe.Pointer(&host[0]), 4*S*H); err != nil {
		return err
	}
	for i, b := range batch {
		copy(out[b*H:(b+1)*H], host[i*H:(i+1)*H])
	}
	return nil
}

// gemm computes y[T, l.out] (fp32) = x[T, l.in] (fp16) l^T: row-major y is cuBLAS's
// column-major y^T = W x^T, with W [out, in] row-major read transposed.
func (g *gpuModel) gemm(y, x *cuda.Buffer, l linear, T int) error {
	return g.blas.GemmEx(cuda.OpT, cuda.OpN, l.out, T, l.in, 1, l.dev.Addr(0), l.in, x.Addr(0), l.in, cuda.R16F, 0, y.Addr(0), l.out)
}
