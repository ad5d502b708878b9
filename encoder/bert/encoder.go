package bert

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"sync"

	"needle/cuda"
	"needle/encoder/wordpiece"
	"needle/internal/gate"
	"needle/kernels/bert/nn"
)

// Options tune an Encoder; zero values take the defaults.
type Options struct {
	MaxLength int    // tokens per text including [CLS] and [SEP]; default 256 (or max_position_embeddings if less)
	Pooling   string // "mean" or "cls"; default from 1_Pooling/config.json, else "mean"
	// SkipNormalize leaves pooled vectors unnormalized (default: L2-normalized, as e5 and
	// sentence-transformers use them for inner-product search).
	SkipNormalize bool
	BatchSize     int // texts per forward pass; default 64
	// MaxBatchTokens caps the tokens of one forward pass (a batch of long texts is split),
	// which bounds the workspace: about MaxBatchTokens * (2*hidden + max(3*hidden,
	// intermediate)) * 4 bytes per concurrent caller. Default 4096.
	MaxBatchTokens int
	// Threads sets the threads of a forward pass (process-wide, see nn.SetThreads); 0 keeps it.
	// Concurrent Encode calls each run their own OpenMP team for batches, so callers x Threads
	// threads compete; a query's GEMMs share one team, one caller at a time.
	Threads int
	// Precision of the Linear layers: "" or "fp16" (default), "int8" or "bf16" (see Precision).
	Precision Precision
	// SegmentB lets EncodeTokens take a pair's second segment (token type 1, as HF's
	// token_type_ids): the word table gets a copy with type 1 - type 0 added to each row, a
	// token of that segment being its id + SegmentBOffset. For cross-encoders (encoder/rerank);
	// CPU only, and the model needs two token types.
	SegmentB bool
	// Device runs the forward pass on this GPU (gpu.go): weights uploaded once, Linears in
	// fp16 by cuBLAS, the rest by package nngpu's kernels; nil runs it on the CPU. fp16 only.
	// BatchSize and MaxBatchTokens then default to 512 and 65536.
	Device *cuda.Device
}

// Encoder turns texts into sentence embeddings. Safe for concurrent Encode calls: weights
// are read-only and each call takes its own workspace from a pool.
type Encoder struct {
	cfg     Config
	opt     Options
	pooling nn.Pooling
	tok     *wordpiece.Tokenizer
	ops     nn.Ops
	w       *weights
	gpu     *gpuModel // set when the forward pass runs on a GPU
	// ownDevice: Close also releases gpu's device (LoadOn opened it).
	ownDevice bool
	spaces    sync.Pool // *workspace
}

// Load reads an HF BERT model folder: config.json, model.safetensors, the tokenizer
// (tokenizer.json or vocab.txt) and, if present, 1_Pooling/config.json.
func Load(dir string, opt Options) (*Encoder, error) {
	cfg, err := readConfig(dir)
	if err != nil {
		return nil, err
	}
	if opt.Pooling == "" {
		if opt.Pooling, err = readPooling(dir); err != nil {
			return nil, err
		}
	}
	tok, err := wordpiece.Load(dir)
	if err != nil {
		return nil, err
	}
	if tok.VocabSize() > cfg.VocabSize {
		return nil, fmt.Errorf("%s: the tokenizer has %d ids but vocab_size is %d", filepath.Join(dir, "config.json"), tok.VocabSize(), cfg.VocabSize)
	}
	ops, err := nn.Selected()
	if err != nil {
		return nil, err
	}
	if opt.Precision, err = ParsePrecision(string(opt.Precision)); err != nil {
		return nil, err
	}
	return newEncoder(cfg, tok, ops, opt, func(p packer) (*weights, error) { return loadWeights(dir, cfg, p) })
}

// NewRandom is an encoder of shape cfg with seeded random weights and the given tokenizer,
// for benchmarking shapes whose checkpoints are not available (e5-base-v2: E5Base).
func NewRandom(cfg Config, seed int64, tok *wordpiece.Tokenizer, opt Options) (*Encoder, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if tok.VocabSize() > cfg.VocabSize {
		return nil, fmt.Errorf("the tokenizer has %d ids but vocab_size is %d", tok.VocabSize(), cfg.VocabSize)
	}
	ops, err := nn.Selected()
	if err != nil {
		return nil, err
	}
	if opt.Precision, err = ParsePrecision(string(opt.Precision)); err != nil {
		return nil, err
	}
	return newEncoder(cfg, tok, ops, opt, func(p packer) (*weights, error) { return randomWeights(cfg, seed, p) })
}

// newEncoder checks opt, then loads the weights with load, on opt.Device when set.
func newEncoder(cfg Config, tok *wordpiece.Tokenizer, ops nn.Ops, opt Options, load func(packer) (*weights, error)) (*Encoder, error) {
	if opt.Device != nil {
		if opt.Precision != FP16 {
			return nil, fmt.Errorf("precision %s runs on the CPU only; the GPU encoder is fp16", opt.Precision)
		}
		opt.BatchSize = cmp.Or(opt.BatchSize, 512)
		opt.MaxBatchTokens = cmp.Or(opt.MaxBatchTokens, 65536)
	}
	if err := opt.Precision.runsOn(ops); err != nil {
		return nil, err
	}
	if opt.MaxLength == 0 {
		opt.MaxLength = min(256, cfg.MaxPositions)
	}
	if opt.MaxLength < 2 || opt.MaxLength > cfg.MaxPositions {
		return nil, fmt.Errorf("max length %d outside [2, %d] (max_position_embeddings)", opt.MaxLength, cfg.MaxPositions)
	}
	if opt.BatchSize == 0 {
		opt.BatchSize = 64
	}
	if opt.MaxBatchTokens == 0 {
		opt.MaxBatchTokens = 4096
	}
	if opt.BatchSize < 0 || opt.MaxBatchTokens < 0 {
		return nil, fmt.Errorf("batch size %d and max batch tokens %d must be positive", opt.BatchSize, opt.MaxBatchTokens)
	}
	e := &Encoder{cfg: cfg, opt: opt, tok: tok, ops: ops}
	switch opt.Pooling {
	case "", "mean":
		e.pooling, e.opt.Pooling = nn.MeanPool, "mean"
	case "cls":
		e.pooling = nn.CLSPool
	default:
		return nil, fmt.Errorf("pooling %q: want mean or cls", opt.Pooling)
	}
	if opt.Threads > 0 {
		nn.SetThreads(opt.Threads)
	}
	e.spaces.New = func() any { return new(workspace) }
	p := packer{ops: ops, prec: opt.Precision}
	if opt.Device != nil {
		g, err := newGPUModel(opt.Device, cfg)
		if err != nil {
			return nil, err
		}
		p.gpu = g
	}
	w, err := load(p)
	if err == nil && p.gpu != nil {
		err = p.gpu.uploadVectors(w)
	}
	if err != nil {
		if p.gpu != nil {
			err = errors.Join(err, p.gpu.close())
		}
		return nil, err
	}
	e.w, e.gpu = w, p.gpu
	if opt.SegmentB {
		if p.gpu != nil || w.type1 == nil {
			e.Close()
			return nil, fmt.Errorf("a pair's second segment needs a CPU encoder and a model of two token types (type_vocab_size %d)", cfg.TypeVocabSize)
		}
		// Row v of the copy is word[v] + (type1 - type0): EmbedLayerNorm then adds type 0 as for
		// every token, giving word + pos + type1 up to float rounding.
		H := cfg.Hidden
		word := make([]float32, 2*len(w.word))
		copy(word, w.word)
		for i, x := range w.word {
			word[len(w.word)+i] = x + (w.type1[i%H] - w.type0[i%H])
		}
		w.word = word
	}
	return e, nil
}

// SegmentBOffset is what EncodeTokens adds to the id of a token of a pair's second segment
// (Options.SegmentB): the vocabulary size.
func (e *Encoder) SegmentBOffset() int32 { return int32(e.cfg.VocabSize) }

// Close frees a GPU encoder's device memory, and the device when LoadOn opened it (a CPU
// encoder has nothing to free).
func (e *Encoder) Close() error {
	if e.gpu == nil {
		return nil
	}
	err := e.gpu.close()
	if e.ownDevice {
		err = errors.Join(err, e.gpu.dev.Close())
	}
	return err
}

// Device is the GPU the encoder runs on, or nil.
func (e *Encoder) Device() *cuda.Device {
	if e.gpu == nil {
		return nil
	}
	return e.gpu.dev
}

// Dim is the embedding width (hidden_size).
func (e *Encoder) Dim() int { return e.cfg.Hidden }

// Options are the effective options (defaults filled in).
func (e *Encoder) Options() Options { return e.opt }

// WeightBytes is the size of the loaded weights in memory (matrices in their precision, fp32 the rest).
func (e *Encoder) WeightBytes() int64 { return e.w.bytes() }

// Tokenizer is the encoder's tokenizer.
func (e *Encoder) Tokenizer() *wordpiece.Tokenizer { return e.tok }

// Encode returns len(texts)*Dim() floats: the embedding of prefix+text for each text, in
// input order. Texts are tokenized, sorted by length and run BatchSize at a time with no
// padding (each sequence attends over exactly its own tokens).
func (e *Encoder) Encode(texts []string, prefix string) ([]float32, error) {
	return e.EncodeContext(context.Background(), texts, prefix)
}

// EncodeContext is Encode that gives up once ctx ends, returning ctx's error
// (engine.ContextEncoder: the server's batcher stops a batch whose clients all went away), and
// that waits at the gate ctx may carry (internal/gate) before each op of a layer on the CPU,
// before each batch on the GPU.
// On the CPU it stops inside a layer: the Linear ops check an nn.Stop that ctx's end sets
// (between team tasks, and between sgemm chunks of 128 rows, which keep the vectors
// bit-identical to Encode's), and no op runs after a stopped one. The GPU encoder checks ctx
// between its batches.
func (e *Encoder) EncodeContext(ctx context.Context, texts []string, prefix string) ([]float32, error) {
	return e.EncodeTokens(ctx, e.tokenize(texts, prefix))
}

// EncodeTokens is EncodeContext on token ids already made, [CLS] and [SEP] included (at most
// max_position_embeddings each; with Options.SegmentB, a pair's second segment offset by
// SegmentBOffset): a cross-encoder's pairs. It returns len(seqs)*Dim() floats in order.
func (e *Encoder) EncodeTokens(ctx context.Context, seqs [][]int32) ([]float32, error) {
	for i, s := range seqs {
		if len(s) == 0 || len(s) > e.cfg.MaxPositions {
			return nil, fmt.Errorf("sequence %d has %d tokens, want 1 to %d", i, len(s), e.cfg.MaxPositions)
		}
	}
	out := make([]float32, len(seqs)*e.cfg.Hidden)
	order := make([]int, len(seqs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(seqs[order[a]]) < len(seqs[order[b]]) })
	batches := e.splitBatches(seqs, order)
	if e.gpu != nil {
		for _, b := range batches {
			if err := gate.Wait(ctx); err != nil {
				return nil, err
			}
			if err := ctx.Err(); err != nil { // a batch on the GPU is one queue of kernels
				return nil, err
			}
			if err := e.gpu.encode(e, seqs, b, out); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	ws := e.spaces.Get().(*workspace)
	defer e.spaces.Put(ws)
	// Size the workspace for the largest batch up front: growing it batch by batch would
	// leave every smaller generation of buffers to the GC and inflate RSS.
	maxTokens := 0
	for _, b := range batches {
		tokens := 0
		for _, i := range b {
			tokens += len(seqs[i])
		}
		maxTokens = max(maxTokens, tokens)
	}
	ws.reserve(e.cfg, maxTokens, min(e.opt.BatchSize, len(seqs)))
	o := e.ops
	if ctx.Done() != nil { // a context that can end: a Stop per call, so none outlives it
		stop := new(nn.Stop)
		defer context.AfterFunc(ctx, stop.Set)()
		o = o.WithStop(stop)
	}
	for _, b := range batches {
		if err := e.forward(ctx, o, ws, seqs, b, out); err != nil {
			if errors.Is(err, nn.ErrStopped) { // only ctx's end sets the Stop
				return nil, ctx.Err()
			}
			return nil, err
		}
	}
	return out, nil
}

// tokenize returns the token ids of prefix+texts[i]. Long inputs are split over up to
// GOMAXPROCS goroutines (the tokenizer is safe for concurrent use), one per 256 texts: a GPU's
// forward pass outruns one core's tokenizing; a few queries stay on the caller's goroutine.
func (e *Encoder) tokenize(texts []string, prefix string) [][]int32 {
	seqs := make([][]int32, len(texts))
	workers := min(runtime.GOMAXPROCS(0), len(texts)/256+1)
	share := func(w int) { // texts w, w+workers, ...
		for i := w; i < len(texts); i += workers {
			seqs[i] = e.tok.Encode(prefix+texts[i], e.opt.MaxLength)
		}
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			share(w)
		}()
	}
	share(0)
	wg.Wait()
	return seqs
}

// splitBatches cuts order into consecutive batches of at most BatchSize texts and
// MaxBatchTokens tokens (a longer text is a batch of its own).
func (e *Encoder) splitBatches(seqs [][]int32, order []int) [][]int {
	var batches [][]int
	lo, tokens := 0, 0
	for i, idx := range order {
		n := len(seqs[idx])
		if i > lo && (i-lo == e.opt.BatchSize || tokens+n > e.opt.MaxBatchTokens) {
			batches = append(batches, order[lo:i])
			lo, tokens = i, 0
		}
		tokens += n
	}
	if lo < len(order) {
		batches = append(batches, order[lo:])
	}
	return batches
}

// workspace is the scratch of one forward pass, grown as needed and reused through the
// Encoder's pool; owned by one Encode call at a time.
type workspace struct {
	ids, pos, start []int32
	x, ctx, big     []float32 // [T,H], [T,H], [T, max(3H, I)]
	scratch, pooled []float32
}

// reserve makes room for batches of up to tokens tokens and seqs sequences.
func (ws *workspace) reserve(cfg Config, tokens, seqs int) {
	H := cfg.Hidden
	if cap(ws.x) < tokens*H {
		ws.x, ws.ctx = make([]float32, tokens*H), make([]float32, tokens*H)
		ws.big = make([]float32, tokens*max(3*H, cfg.Intermediate))
		ws.ids, ws.pos = make([]int32, 0, tokens), make([]int32, 0, tokens)
	}
	if cap(ws.pooled) < seqs*H {
		ws.pooled = make([]float32, seqs*H)
		ws.start = make([]int32, 0, seqs+1)
	}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// forward encodes seqs[batch[i]] into out[batch[i]*H:] with the ops o. It returns ctx's error
// between layers, and nn.ErrStopped from an op that o's Stop ended. Before each op of a layer
// it waits at the gate ctx may carry (internal/gate: the server's bulk work gives way to a
// single query's; one op of a 64-query batch of MiniLM takes up to ~15 ms on 2 cores).
func (e *Encoder) forward(ctx context.Context, o nn.Ops, ws *workspace, seqs [][]int32, batch []int, out []float32) error {
	H, I, eps := e.cfg.Hidden, e.cfg.Intermediate, e.cfg.Eps
	ws.ids, ws.pos, ws.start = packBatch(ws.ids, ws.pos, ws.start, seqs, batch)
	T := len(ws.ids)
	ws.x, ws.ctx = grow(ws.x, T*H), grow(ws.ctx, T*H)
	ws.big = grow(ws.big, T*max(3*H, I))
	ws.scratch = grow(ws.scratch, nn.AttentionScratch(ws.start, H/e.cfg.Heads))
	ws.pooled = grow(ws.pooled, len(batch)*H)
	w := e.w
	if err := o.EmbedLayerNorm(ws.x, ws.ids, ws.pos, w.word, w.pos, w.type0, w.embGamma, w.embBeta, H, eps); err != nil {
		return err
	}
	for _, l := range w.layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		qkv := ws.big[:T*3*H]
		err := inOrder(ctx,
			func() error { return l.qkv.apply(o, qkv, ws.x, l.qkvB, T, nn.NoAct) },
			func() error { return o.Attention(ws.ctx, qkv, ws.start, e.cfg.Heads, H/e.cfg.Heads, ws.scratch) },
			// attention output: x = LN(ctx W^T + b + x); the GEMM result reuses big.
			func() error { return l.attnOut.apply(o, ws.big[:T*H], ws.ctx, nil, T, nn.NoAct) },
			func() error {
				return o.AddLayerNorm(ws.x, ws.big[:T*H], l.attnOutB, ws.x, l.ln1Gamma, l.ln1Beta, T, H, eps)
			},
			// FFN: x = LN(GELU(x W1^T + b1) W2^T + b2 + x); the second GEMM writes into ctx.
			func() error { return l.ffnIn.apply(o, ws.big[:T*I], ws.x, l.ffnInB, T, nn.GELU) },
			func() error { return l.ffnOut.apply(o, ws.ctx, ws.big[:T*I], nil, T, nn.NoAct) },
			func() error { return o.AddLayerNorm(ws.x, ws.ctx, l.ffnOutB, ws.x, l.ln2Gamma, l.ln2Beta, T, H, eps) },
		)
		if err != nil {
			return err
		}
	}
	if err := o.Pool(ws.pooled, ws.x, ws.start, H, e.pooling, !e.opt.SkipNormalize); err != nil {
		return err
	}
	for i, b := range batch {
		copy(out[b*H:(b+1)*H], ws.pooled[i*H:(i+1)*H])
	}
	return nil
}

// packBatch packs the sequences seqs[batch[i]] into ids (reusing the slices given): their
// token ids, each token's position in its sequence, and the offsets start of the sequences
// (len(batch)+1, the last one the token count), as the attention ops take them.
func packBatch(ids, pos, start []int32, seqs [][]int32, batch []int) ([]int32, []int32, []int32) {
	ids, pos, start = ids[:0], pos[:0], append(start[:0], 0)
	for _, b := range batch {
		ids = append(ids, seqs[b]...)
		for p := range seqs[b] {
			pos = append(pos, int32(p))
		}
		start = append(start, int32(len(ids)))
	}
	return ids, pos, start
}

// firstErr returns the first non-nil error of calls that all ran (gpu.go: device uploads).
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// inOrder runs the ops of a layer in order up to the first error: nn.ErrStopped (the batch's
// context ended), ctx's error when it ended while the batch waited at ctx's gate, or a size
// error (buffers are sized above, so that is a bug reported, not a panic).
func inOrder(ctx context.Context, ops ...func() error) error {
	for _, op := range ops {
		if err := gate.Wait(ctx); err != nil {
			return err
		}
		if err := op(); err != nil {
			return err
		}
	}
	return nil
}
