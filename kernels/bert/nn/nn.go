// Package nn holds the ops of a BERT encoder forward pass: Linear on fp16 weights packed in
// panels (a GEMM of its own, batch-invariant: a row's bits never depend on the other rows of
// its batch, nor on a BLAS library) fused with bias/GELU, LayerNorm with residual, masked softmax, packed-sequence attention,
// embeddings, pooling and L2 normalization. Each op has a scalar C reference and AVX2/AVX-512
// variants; an Ops value runs one level. Every call is one cgo call for a whole batch. Buffers
// are caller-owned, row-major float32 (weights: see Linear); sizes are checked here, so bad
// sizes are errors, never crashes. All methods are safe for concurrent use on distinct output
// buffers.
package nn

/*
#cgo CFLAGS: -O3 -fopenmp -Wno-psabi
#cgo LDFLAGS: -fopenmp -lm
#include <stdlib.h>
#include "nn.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"needle/platform/cpu"
)

// Act is the activation fused after a bias add.
type Act int

const (
	NoAct Act = C.NN_ACT_NONE
	GELU  Act = C.NN_ACT_GELU // erf GELU, as BERT's "gelu"
)

// Pooling turns a sequence's token vectors into one vector.
type Pooling int

const (
	MeanPool Pooling = C.NN_POOL_MEAN // mean over all tokens ([CLS] and [SEP] included)
	CLSPool  Pooling = C.NN_POOL_CLS  // the [CLS] token's vector
)

// Ops runs the ops at one SIMD level.
type Ops struct {
	level cpu.Level
	stop  *Stop // nil: Linear runs to the end
}

// New returns the ops of level (callers pick a level from needle/platform/cpu).
func New(level cpu.Level) Ops { return Ops{level: level} }

// Stop is a flag that ends the Linear, LinearInt8 and LinearBF16 calls of the Ops it was given
// to (WithStop) early:
// set from any goroutine while a call runs, that call claims no more team tasks and returns
// ErrStopped, its output partly written. encoder/bert sets it when the
// context of a batch ends (the server's clients all went away), so that a batch stops inside
// a layer. The flag is read by C during the call (it holds no Go pointer, so cgo may pass it);
// a Stop is never cleared: use a new one per cancellable job.
type Stop struct{ flag int32 }

// Set stops the calls running with s and every later one. Safe for concurrent use.
func (s *Stop) Set() { atomic.StoreInt32(&s.flag, 1) }

// ErrStopped is the Linears' error when their Stop was set: the output is incomplete.
var ErrStopped = errors.New("nn: stopped")

// WithStop returns o with s checked by the Linears between their team tasks (a set Stop
// changes no bit of what was written); nil removes it.
func (o Ops) WithStop(s *Stop) Ops {
	o.stop = s
	return o
}

// stopFlag is the flag as the C ops take it (NULL: none).
func (o Ops) stopFlag() *C.int32_t {
	if o.stop == nil {
		return nil
	}
	return (*C.int32_t)(unsafe.Pointer(&o.stop.flag))
}

// Selected returns the ops of the level needle/platform/cpu selects (NEEDLE_SIMD or the best).
func Selected() (Ops, error) {
	l, err := cpu.Selected()
	return New(l), err
}

// Level is the SIMD level these ops run.
func (o Ops) Level() cpu.Level { return o.level }

// SetThreads sets the thread count of every op (process-wide): OpenMP's for the row-wise
// ops, and the Linears' own team (team.c). Concurrent callers each get an OpenMP team of this
// size, so n * callers threads can compete for the cores; the team serves one caller at a
// time and the others run their Linears alone.
func SetThreads(n int) { C.nn_set_threads(C.int(n)) }

// Threads is the thread count set by SetThreads (until then, OpenMP's: all cores).
func Threads() int { return int(C.nn_get_threads()) }

func fp(x []float32) *C.float {
	if len(x) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&x[0]))
}

func ip(x []int32) *C.int32_t {
	if len(x) == 0 {
		return nil
	}
	return (*C.int32_t)(unsafe.Pointer(&x[0]))
}

// need checks that buffer name of op holds at least n floats.
func need(op, name string, have, n int) error {
	if n < 0 || have < n {
		return fmt.Errorf("nn.%s: %s has %d elements, needs %d", op, name, have, n)
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func hp(x []uint16) *C.uint16_t {
	if len(x) == 0 {
		return nil
	}
	return (*C.uint16_t)(unsafe.Pointer(&x[0]))
}

// Linear computes y[rows,out] = act(x[rows,in] * w^T + b[out]), where w is the [out,in]
// matrix (PyTorch's Linear layout) packed as fp16 by PackHalf; products and sums are
// float32, each output one FMA chain over its inputs in order, so a row's output is the same
// bits alone or in any batch (batch invariance; the reference level sums in float64). Rows
// are dotted straight against the fp16 panels (half the bytes of fp32), each task's rows
// reading a weight once. b may be nil. With a Stop (WithStop) that is set, it returns ErrStopped.
func (o Ops) Linear(y, x []float32, w []uint16, b []float32, rows, in, out int, act Act) error {
	if err := firstErr(need("Linear", "y", len(y), rows*out), need("Linear", "x", len(x), rows*in),
		need("Linear", "w", len(w), PackedLen(out, in)), optional("Linear", "b", b, out)); err != nil {
		return err
	}
	switch C.nn_linear(C.int(o.level), fp(x), hp(w), fp(b), fp(y), C.int64_t(rows), C.int64_t(in), C.int64_t(out), C.int(act), o.stopFlag()) {
	case 0:
		return nil
	case C.NN_STOPPED:
		return ErrStopped
	}
	return fmt.Errorf("nn.Linear: no memory for the scratch of %d rows x %d inputs (%d outputs)", rows, in, out)
}

// PackedLen is the length of PackHalf's output for an [out,in] matrix: panels of 16
// outputs, the last one zero-padded.
func PackedLen(out, in int) int { return (out + C.NN_PANEL - 1) / C.NN_PANEL * C.NN_PANEL * in }

// HalfRangeError is PackHalf's error for a value that is not finite in fp16.
type HalfRangeError struct {
	Index int // in the packed matrix, row-major [out,in]
	Value float32
}

func (e *HalfRangeError) Error() string {
	return fmt.Sprintf("value %g at index %d is outside the fp16 range (|x| < 65520)", e.Value, e.Index)
}

// PackHalf rounds w[out,in] to IEEE binary16 (fp16, ties to even) into dst in Linear's
// panel layout (nn.h). A value that is not finite in fp16 (NaN, ±Inf, |x| >= 65520) is a
// *HalfRangeError.
func (o Ops) PackHalf(dst []uint16, w []float32, out, in int) error {
	if err := firstErr(need("PackHalf", "dst", len(dst), PackedLen(out, in)), need("PackHalf", "w", len(w), out*in)); err != nil {
		return err
	}
	if i := int(C.nn_pack_half(C.int(o.level), hp(dst), fp(w), C.int64_t(out), C.int64_t(in))); i >= 0 {
		return &HalfRangeError{i, w[i]}
	}
	return nil
}

// Int8Matrix is an [Out,In] weight matrix quantized for LinearInt8 by PackInt8: int8
// (symmetric, [-127, 127]) with a float32 scale per output and group of 32 inputs. Immutable;
// safe to share.
type Int8Matrix struct {
	out, in int
	q       []int8
	scale   []float32
}

// Bytes is the matrix's size in memory.
func (m *Int8Matrix) Bytes() int64 { return int64(len(m.q) + 4*len(m.scale)) }

// NonFiniteError is PackInt8's and PackBF16's error for a NaN or ±Inf weight (or, in bf16, one
// that rounds to ±Inf).
type NonFiniteError struct {
	Index int // in w, row-major [out,in]
	Value float32
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("value %g at index %d is not finite", e.Value, e.Index)
}

// PackInt8 quantizes w[out,in] per output and group of 32 inputs for LinearInt8 (scale
// max|w[o, group]|/127). A NaN or ±Inf value is a *NonFiniteError.
func PackInt8(w []float32, out, in int) (*Int8Matrix, error) {
	if out < 0 || in < 0 {
		return nil, fmt.Errorf("nn.PackInt8: shape [%d,%d]", out, in)
	}
	if err := need("PackInt8", "w", len(w), out*in); err != nil {
		return nil, err
	}
	padded, k := paddedOut(out), q8K(in)
	m := &Int8Matrix{out: out, in: in, q: make([]int8, padded*k), scale: make([]float32, padded*k/C.NN_Q8_GROUP)}
	if i := int(C.nn_pack_q8(q8p(m.q), fp(m.scale), fp(w), C.int64_t(out), C.int64_t(in))); i >= 0 {
		return nil, &NonFiniteError{i, w[i]}
	}
	return m, nil
}

// paddedOut is out rounded up to whole panels.
func paddedOut(out int) int { return (out + C.NN_PANEL - 1) / C.NN_PANEL * C.NN_PANEL }

func q8p(x []int8) *C.int8_t {
	if len(x) == 0 {
		return nil
	}
	return (*C.int8_t)(unsafe.Pointer(&x[0]))
}

// q8K is the length of an int8 Linear's quantized row of in values (NN_Q8_K: whole groups).
func q8K(in int) int { return (in + C.NN_Q8_GROUP - 1) / C.NN_Q8_GROUP * C.NN_Q8_GROUP }

// bf16K is the length of a bf16 Linear's rounded row of in values (NN_BF16_K: whole pairs).
func bf16K(in int) int { return (in + 1) / 2 * 2 }

// LinearInt8 computes y[rows,out] = act(x[rows,in] * w^T + b) for w packed by PackInt8: each
// row of x is quantized to int16 (symmetric, its own scale: why not 8 bits, see nn.h), the
// products of each group of 32 inputs are summed exactly in int32 (vpmaddwd, or vpdpwssd
// with VNNI) and the groups, scaled, in float32, in the same order at every level (so every
// level gives the reference's bits); dequantize, bias and activation are fused into the store.
// All row counts run on the team of the few-row Linear (see SetThreads). b may be nil.
func (o Ops) LinearInt8(y, x []float32, w *Int8Matrix, b []float32, rows int, act Act) error {
	if w == nil {
		return fmt.Errorf("nn.LinearInt8: no weights")
	}
	if err := firstErr(need("LinearInt8", "y", len(y), rows*w.out), need("LinearInt8", "x", len(x), rows*w.in),
		optional("LinearInt8", "b", b, w.out)); err != nil {
		return err
	}
	if rows == 0 || w.out == 0 {
		return nil
	}
	switch C.nn_linear_q8(C.int(o.level), fp(x), q8p(w.q), fp(w.scale), fp(b), fp(y),
		C.int64_t(rows), C.int64_t(w.in), C.int64_t(w.out), C.int(act), o.stopFlag()) {
	case 0:
		return nil
	case C.NN_STOPPED:
		return ErrStopped
	}
	return fmt.Errorf("nn.LinearInt8: no memory for %d quantized rows of %d", rows, w.in)
}

// BF16Matrix is an [Out,In] weight matrix rounded to bfloat16 for LinearBF16 by PackBF16.
// Immutable; safe to share.
type BF16Matrix struct {
	out, in int
	w       []uint16
}

// Bytes is the matrix's size in memory.
func (m *BF16Matrix) Bytes() int64 { return 2 * int64(len(m.w)) }

// PackBF16 rounds w[out,in] to bfloat16 (ties to even) for LinearBF16. A NaN or ±Inf value, or
// one that rounds to ±Inf, is a *NonFiniteError.
func PackBF16(w []float32, out, in int) (*BF16Matrix, error) {
	if out < 0 || in < 0 {
		return nil, fmt.Errorf("nn.PackBF16: shape [%d,%d]", out, in)
	}
	if err := need("PackBF16", "w", len(w), out*in); err != nil {
		return nil, err
	}
	m := &BF16Matrix{out: out, in: in, w: make([]uint16, paddedOut(out)*bf16K(in))}
	if i := int(C.nn_pack_bf16(hp(m.w), fp(w), C.int64_t(out), C.int64_t(in))); i >= 0 {
		return nil, &NonFiniteError{i, w[i]}
	}
	return m, nil
}

// Format is a Linear's number format, as the engine's precisions name them.
type Format int

const (
	FP16 Format = C.NN_FP16 // Linear: fp16 weights, fp32 products and sums
	Int8 Format = C.NN_INT8 // LinearInt8
	BF16 Format = C.NN_BF16 // LinearBF16
)

// Peak measures, for about the given time, the multiply rate (ops/s, 2 per multiply-add) that
// the Linear of format f cannot exceed at this level on threads threads: its multiply
// instruction (fp16: the fp32 FMA; int8: vpmaddwd + vpaddd, or vpdpwssd with VNNI; bf16:
// vdpbf16ps, or TDPBF16PS at the amx level) run on registers (tiles) alone. 0 at the reference level or for a format the level
// lacks. It takes the whole team: run nothing else meanwhile.
func (o Ops) Peak(f Format, threads int, seconds float64) float64 {
	return float64(C.nn_peak(C.int(o.level), C.int(f), C.int(threads), C.double(seconds)))
}

// HasBF16 reports whether these ops have a bf16 GEMM: the AVX512BF16 level (vdpbf16ps), the AMX
// level (TDPBF16PS on tiles) and the scalar reference.
func (o Ops) HasBF16() bool { return C.nn_has_bf16(C.int(o.level)) != 0 }

// LinearBF16 computes y[rows,out] = act(x[rows,in] * w^T + b) for w packed by PackBF16: each row
// of x is rounded to bf16, the products (exact in float32) are summed in float32, and the
// bias and activation are fused into the store. All row counts run on the team of the
// few-row Linear. b may be nil. Levels without a bf16 GEMM (HasBF16) answer an error.
func (o Ops) LinearBF16(y, x []float32, w *BF16Matrix, b []float32, rows int, act Act) error {
	if w == nil {
		return fmt.Errorf("nn.LinearBF16: no weights")
	}
	if err := firstErr(need("LinearBF16", "y", len(y), rows*w.out), need("LinearBF16", "x", len(x), rows*w.in),
		optional("LinearBF16", "b", b, w.out)); err != nil {
		return err
	}
	switch C.nn_linear_bf16(C.int(o.level), fp(x), hp(w.w), fp(b), fp(y), C.int64_t(rows), C.int64_t(w.in),
		C.int64_t(w.out), C.int(act), o.stopFlag()) {
	case C.NN_STOPPED:
		return ErrStopped
	case -1:
		return fmt.Errorf("nn.LinearBF16: no memory for %d rounded rows of %d", rows, w.in)
	case -2:
		return fmt.Errorf("nn.LinearBF16: SIMD level %v has no bf16 GEMM (it needs level avx512bf16)", o.level)
	}
	return nil
}

// optional checks a buffer that may be nil.
func optional(op, name string, x []float32, n int) error {
	if x == nil {
		return nil
	}
	return need(op, name, len(x), n)
}

// AddLayerNorm computes dst = LayerNorm(x + bias + res) * gamma + beta row by row
// (biased variance, like torch). bias ([n]) and res ([rows,n]) may be nil; dst may be x or res.
func (o Ops) AddLayerNorm(dst, x, bias, res, gamma, beta []float32, rows, n int, eps float32) error {
	if err := firstErr(need("AddLayerNorm", "dst", len(dst), rows*n), need("AddLayerNorm", "x", len(x), rows*n),
		optional("AddLayerNorm", "bias", bias, n), optional("AddLayerNorm", "res", res, rows*n),
		need("AddLayerNorm", "gamma", len(gamma), n), need("AddLayerNorm", "beta", len(beta), n)); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	C.nn_add_layernorm(C.int(o.level), fp(dst), fp(x), fp(bias), fp(res), fp(gamma), fp(beta), C.int64_t(rows), C.int64_t(n), C.float(eps))
	return nil
}

// BiasAct computes x = act(x + bias) row by row; bias ([n]) may be nil.
func (o Ops) BiasAct(x, bias []float32, rows, n int, act Act) error {
	if err := firstErr(need("BiasAct", "x", len(x), rows*n), optional("BiasAct", "bias", bias, n)); err != nil {
		return err
	}
	C.nn_bias_act(C.int(o.level), fp(x), fp(bias), C.int64_t(rows), C.int64_t(n), C.int(act))
	return nil
}

// Softmax replaces each row's first valid elements by softmax(scale * x) and zeroes the rest
// (the padding mask).
func (o Ops) Softmax(x []float32, rows, n, valid int, scale float32) error {
	if err := need("Softmax", "x", len(x), rows*n); err != nil {
		return err
	}
	if valid < 0 || valid > n {
		return fmt.Errorf("nn.Softmax: valid %d outside [0, %d]", valid, n)
	}
	C.nn_softmax(C.int(o.level), fp(x), C.int64_t(rows), C.int64_t(n), C.int64_t(valid), C.float(scale))
	return nil
}

// L2Normalize scales each row to unit norm (rows of norm < 1e-12 are divided by 1e-12).
func (o Ops) L2Normalize(x []float32, rows, n int) error {
	if err := need("L2Normalize", "x", len(x), rows*n); err != nil {
		return err
	}
	C.nn_l2_normalize(C.int(o.level), fp(x), C.int64_t(rows), C.int64_t(n))
	return nil
}

// EmbedLayerNorm writes, for each token t, dst[t] = LayerNorm(word[ids[t]] + pos[posIDs[t]] +
// type0) * gamma + beta: BERT's embeddings for token type 0. word and pos are [*, n] tables.
func (o Ops) EmbedLayerNorm(dst []float32, ids, posIDs []int32, word, pos, type0, gamma, beta []float32, n int, eps float32) error {
	if n <= 0 {
		return fmt.Errorf("nn.EmbedLayerNorm: width %d", n)
	}
	ntok := len(ids)
	if err := firstErr(need("EmbedLayerNorm", "dst", len(dst), ntok*n), need("EmbedLayerNorm", "posIDs", len(posIDs), ntok),
		need("EmbedLayerNorm", "type0", len(type0), n), need("EmbedLayerNorm", "gamma", len(gamma), n),
		need("EmbedLayerNorm", "beta", len(beta), n)); err != nil {
		return err
	}
	vocab, npos := int32(len(word)/n), int32(len(pos)/n)
	for t := range ids {
		if ids[t] < 0 || ids[t] >= vocab {
			return fmt.Errorf("nn.EmbedLayerNorm: token id %d outside the vocabulary of %d", ids[t], vocab)
		}
		if posIDs[t] < 0 || posIDs[t] >= npos {
			return fmt.Errorf("nn.EmbedLayerNorm: position %d outside the %d position embeddings", posIDs[t], npos)
		}
	}
	C.nn_embed_layernorm(C.int(o.level), fp(dst), ip(ids), ip(posIDs), C.int64_t(ntok), fp(word), fp(pos),
		fp(type0), fp(gamma), fp(beta), C.int64_t(n), C.float(eps))
	return nil
}

// checkStarts validates packed-sequence boundaries: start[0] = 0, non-decreasing, and
// start[len-1] = tokens. It returns the longest sequence.
func checkStarts(op string, start []int32, tokens int) (int, error) {
	if len(start) == 0 || start[0] != 0 || int(start[len(start)-1]) != tokens {
		return 0, fmt.Errorf("nn.%s: sequence starts must run from 0 to the %d tokens", op, tokens)
	}
	longest := 0
	for s := 1; s < len(start); s++ {
		l := int(start[s] - start[s-1])
		if l < 0 {
			return 0, fmt.Errorf("nn.%s: sequence %d has negative length", op, s-1)
		}
		longest = max(longest, l)
	}
	return longest, nil
}

// AttentionScratch is the scratch size (floats) Attention needs for these sequences and head width.
func AttentionScratch(start []int32, headDim int) int {
	longest := 0
	for s := 1; s < len(start); s++ {
		longest = max(longest, int(start[s]-start[s-1]))
	}
	return Threads() * headScratch(longest, headDim)
}

// headScratch is nn_head_scratch: the floats of one (sequence, head) attend call.
func headScratch(L, hd int) int { return int(C.nn_head_scratch(C.int64_t(L), C.int64_t(hd))) }

// Attention is multi-head self-attention over packed sequences with no padding: sequence s
// is tokens [start[s], start[s+1]). qkv is [T, 3*heads*headDim] (Q | K | V with biases
// applied), ctx receives [T, heads*headDim]. scratch holds AttentionScratch(start, headDim) floats.
func (o Ops) Attention(ctx, qkv []float32, start []int32, heads, headDim int, scratch []float32) error {
	if heads <= 0 || headDim <= 0 || headDim > C.NN_ATT_MAX_HD {
		return fmt.Errorf("nn.Attention: %d heads of width %d (at most %d)", heads, headDim, C.NN_ATT_MAX_HD)
	}
	hidden := heads * headDim
	tokens := len(qkv) / (3 * hidden)
	longest, err := checkStarts("Attention", start, tokens)
	if err != nil {
		return err
	}
	threads := Threads()
	if err := firstErr(need("Attention", "qkv", len(qkv), tokens*3*hidden), need("Attention", "ctx", len(ctx), tokens*hidden),
		need("Attention", "scratch", len(scratch), threads*headScratch(longest, headDim))); err != nil {
		return err
	}
	if tokens == 0 {
		return nil
	}
	C.nn_attention(C.int(o.level), fp(qkv), fp(ctx), ip(start), C.int32_t(len(start)-1), C.int32_t(heads),
		C.int32_t(headDim), fp(scratch), C.int64_t(headScratch(longest, headDim)), C.int(threads))
	return nil
}

// Pool writes one vector of width n per packed sequence of x into dst ([len(start)-1, n]),
// L2-normalized if normalize. An empty sequence pools to zeros.
func (o Ops) Pool(dst, x []float32, start []int32, n int, mode Pooling, normalize bool) error {
	if n <= 0 {
		return fmt.Errorf("nn.Pool: width %d", n)
	}
	if _, err := checkStarts("Pool", start, len(x)/n); err != nil {
		return err
	}
	nseq := len(start) - 1
	if err := need("Pool", "dst", len(dst), nseq*n); err != nil {
		return err
	}
	norm := 0
	if normalize {
		norm = 1
	}
	C.nn_pool(C.int(o.level), fp(dst), fp(x), ip(start), C.int32_t(nseq), C.int64_t(n), C.int(mode), C.int(norm))
	return nil
}

// LinearTaskRows is the rows of one task of the fp16 Linear (nn.h), for tests that check
// what a stop leaves and batches of more than one task.
const LinearTaskRows = C.NN_LINEAR_ROWS
