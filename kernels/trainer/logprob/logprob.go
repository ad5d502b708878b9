// Package logprob recomputes the log-probabilities of sampled tokens, as RL trainers do every
// step (verl logprobs_from_logits / entropy_from_logits): logits [rows, vocab] in bf16, fp16 or
// fp32 + labels -> fp32 logprob, and optionally entropy and logsumexp, in one pass over each row.
// LinearCompute is the fused variant from hidden states and lm_head that never holds the logits.
//
// The math lives in C (logprob.h: scalar reference, AVX2, AVX-512, picked by platform/cpu), the
// same sources libneedle.so (capi/) exports to the trainer's process; logprob.cu is the CUDA
// kernel (see gpu.go). Every call is one cgo call; all functions are safe for concurrent use.
package logprob

/*
// -std=c11, not gnu11: in ISO mode GCC does not contract a * b + c into an FMA (the GNU modes
// do), so fp32 math runs exactly as written. The kernels need that: y = x * inv_t fused into
// y - m gives an unrounded difference that can exceed 0 and overflow exp. Wanted FMAs are
// explicit intrinsics. (cgo rejects -ffp-contract=off; CMake passes it, see CMakeLists.txt.)
#cgo CFLAGS: -O3 -std=c11 -fopenmp -Wno-psabi
#cgo LDFLAGS: -fopenmp -lpthread -lm
#include <omp.h>

#include "logprob.h"

// go_logprob and go_linear build the argument struct on the C side: a Go struct holding Go
// pointers may not be passed to C.
static int go_logprob(const void* logits, int32_t dtype, int64_t n, int64_t v,
                      const int64_t* labels, float temperature, int64_t ignore_index,
                      float* logprob, float* entropy, float* lse, int32_t level,
                      int32_t threads, char* err, size_t errlen) {
  nl_logprob_args a = {logits, dtype, n, v, labels, temperature, ignore_index, logprob, entropy, lse};
  return nl_logprob_run(&a, level, threads, err, errlen);
}

// go_linear runs the fused op on a team of threads OpenMP threads (< 1: OpenMP's default), set
// and restored around the call on this OS thread.
static int go_linear(const float* hidden, int64_t h, const float* lm_head, int64_t n, int64_t v,
                     const int64_t* labels, float temperature, int64_t ignore_index,
                     float* logprob, float* entropy, float* lse, int32_t level,
                     int32_t threads, char* err, size_t errlen) {
  nl_logprob_args a = {NULL, NL_F32, n, v, labels, temperature, ignore_index, logprob, entropy, lse};
  const int saved = omp_get_max_threads();
  if (threads > 0) omp_set_num_threads(threads);
  const int rc = nl_linear_logprob_run(hidden, h, lm_head, &a, level, err, errlen);
  if (threads > 0) omp_set_num_threads(saved);
  return rc;
}

// go_check runs the C argument checks (labels, temperature) without computing anything.
static int go_check(int64_t n, int64_t v, const int64_t* labels, float temperature,
                    int64_t ignore_index, char* err, size_t errlen) {
  float dummy;
  nl_logprob_args a = {NULL, NL_F32, n, v, labels, temperature, ignore_index, &dummy, NULL, NULL};
  return nl_check_args(&a, NL_LEVEL_REF, err, errlen);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"needle/platform/cpu"
)

// DType is the element type of the logits.
type DType int32

const (
	F32  DType = C.NL_F32
	F16  DType = C.NL_F16
	BF16 DType = C.NL_BF16
)

// Size is the size of one element in bytes.
func (d DType) Size() int {
	if d == F32 {
		return 4
	}
	return 2
}

func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("dtype(%d)", int32(d))
}

// ParseDType reads "f32", "f16" or "bf16", in any case (safetensors says "F32", "F16", "BF16").
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(s) {
	case "f32":
		return F32, nil
	case "f16":
		return F16, nil
	case "bf16":
		return BF16, nil
	}
	return 0, fmt.Errorf("unknown logits dtype %q (want f32, f16 or bf16)", s)
}

// DefaultIgnoreIndex is the label PyTorch and verl mark padding with.
const DefaultIgnoreIndex = -100

// Logits is a row-major [Rows, Vocab] tensor; Data holds its raw little-endian elements. Data is
// the caller's and only read.
type Logits struct {
	DType       DType
	Rows, Vocab int
	Data        []byte
}

// Options of a call. Use DefaultOptions and change what differs: the zero value is invalid
// (temperature 0, and ignore index 0 would be a real token).
type Options struct {
	Temperature float32 // logits are divided by it first; must be finite and > 0
	IgnoreIndex int64   // rows whose label equals it get logprob 0
	// Threads is the native threads the rows are split over (< 1 means 1); LinearCompute's
	// OpenMP team (< 1: OMP_NUM_THREADS).
	Threads int
}

// DefaultOptions is temperature 1, ignore index -100, one thread.
func DefaultOptions() Options {
	return Options{Temperature: 1, IgnoreIndex: DefaultIgnoreIndex, Threads: 1}
}

// Output holds the caller's result buffers, each of length Rows. Entropy and LSE may be nil.
type Output struct {
	Logprob, Entropy, LSE []float32
}

func (o Output) check(rows int) error {
	if len(o.Logprob) != rows {
		return fmt.Errorf("logprob output has %d floats, want %d (rows)", len(o.Logprob), rows)
	}
	if o.Entropy != nil && len(o.Entropy) != rows {
		return fmt.Errorf("entropy output has %d floats, want %d (rows) or nil", len(o.Entropy), rows)
	}
	if o.LSE != nil && len(o.LSE) != rows {
		return fmt.Errorf("lse output has %d floats, want %d (rows) or nil", len(o.LSE), rows)
	}
	return nil
}

func checkShape(rows, vocab int, labels []int64) error {
	if rows < 0 || vocab < 1 {
		return fmt.Errorf("bad shape [%d, %d]: need rows >= 0 and vocab >= 1", rows, vocab)
	}
	if len(labels) != rows {
		return fmt.Errorf("labels has %d entries, want %d (rows)", len(labels), rows)
	}
	return nil
}

// Compute fills out from x and labels with the SIMD level platform/cpu selected.
func Compute(x Logits, labels []int64, opt Options, out Output) error {
	level, err := cpu.Selected()
	if err != nil {
		return err
	}
	return ComputeAt(level, x, labels, opt, out)
}

// ComputeAt is Compute at a given SIMD level (tests and benchmarks compare levels).
func ComputeAt(level cpu.Level, x Logits, labels []int64, opt Options, out Output) error {
	if err := checkLogits(x, labels, out); err != nil {
		return err
	}
	errBuf := getErrBuf()
	defer errBufs.Put(errBuf)
	rc := C.go_logprob(ptr(x.Data), C.int32_t(x.DType), C.int64_t(x.Rows), C.int64_t(x.Vocab),
		(*C.int64_t)(ptr(labels)), C.float(opt.Temperature), C.int64_t(opt.IgnoreIndex),
		(*C.float)(ptr(out.Logprob)), (*C.float)(ptr(out.Entropy)), (*C.float)(ptr(out.LSE)),
		C.int32_t(level), C.int32_t(opt.Threads), &errBuf[0], C.size_t(len(errBuf)))
	if rc != 0 {
		return errors.New("logprob: " + C.GoString(&errBuf[0]))
	}
	return nil
}

// checkLogits checks the Go-side shapes of a Compute call.
func checkLogits(x Logits, labels []int64, out Output) error {
	if x.DType != F32 && x.DType != F16 && x.DType != BF16 {
		return fmt.Errorf("logits: unknown dtype %v", x.DType)
	}
	if err := checkShape(x.Rows, x.Vocab, labels); err != nil {
		return fmt.Errorf("logits: %w", err)
	}
	if want := x.Rows * x.Vocab * x.DType.Size(); len(x.Data) != want {
		return fmt.Errorf("logits: %d bytes, want %d (%d x %d %v)", len(x.Data), want, x.Rows, x.Vocab, x.DType)
	}
	return out.check(x.Rows)
}

// checkArgs is everything ComputeAt checks, without computing (for the GPU path, whose kernel
// trusts its arguments).
func checkArgs(x Logits, labels []int64, opt Options, out Output) error {
	if err := checkLogits(x, labels, out); err != nil {
		return err
	}
	errBuf := getErrBuf()
	defer errBufs.Put(errBuf)
	if C.go_check(C.int64_t(x.Rows), C.int64_t(x.Vocab), (*C.int64_t)(ptr(labels)), C.float(opt.Temperature),
		C.int64_t(opt.IgnoreIndex), &errBuf[0], C.size_t(len(errBuf))) != 0 {
		return errors.New("logprob: " + C.GoString(&errBuf[0]))
	}
	return nil
}

// LinearCompute fills out from hidden [rows, h] and lmHead [vocab, h] (fp32, row-major) without
// holding the [rows, vocab] logits: chunks of rows x 1,024 vocabulary rows of batch-invariant
// dot products (kernels/linalg/dotmm) on a team of opt.Threads OpenMP threads (< 1: OpenMP's,
// OMP_NUM_THREADS, as libneedle.so runs it), whatever BLAS the process loads. `needle bench
// kernels` measures it.
func LinearCompute(hidden []float32, rows, h int, lmHead []float32, vocab int, labels []int64, opt Options, out Output) error {
	level, err := cpu.Selected()
	if err != nil {
		return err
	}
	return LinearComputeAt(level, hidden, rows, h, lmHead, vocab, labels, opt, out)
}

// LinearComputeAt is LinearCompute at a given SIMD level.
func LinearComputeAt(level cpu.Level, hidden []float32, rows, h int, lmHead []float32, vocab int, labels []int64, opt Options, out Output) error {
	if err := checkShape(rows, vocab, labels); err != nil {
		return fmt.Errorf("hidden/lm_head: %w", err)
	}
	if h < 1 || len(hidden) != rows*h {
		return fmt.Errorf("hidden: %d floats, want rows x h = %d x %d (h >= 1)", len(hidden), rows, h)
	}
	if len(lmHead) != vocab*h {
		return fmt.Errorf("lm_head: %d floats, want vocab x h = %d x %d", len(lmHead), vocab, h)
	}
	if err := out.check(rows); err != nil {
		return err
	}
	errBuf := getErrBuf()
	defer errBufs.Put(errBuf)
	rc := C.go_linear((*C.float)(ptr(hidden)), C.int64_t(h), (*C.float)(ptr(lmHead)),
		C.int64_t(rows), C.int64_t(vocab), (*C.int64_t)(ptr(labels)), C.float(opt.Temperature),
		C.int64_t(opt.IgnoreIndex), (*C.float)(ptr(out.Logprob)), (*C.float)(ptr(out.Entropy)),
		(*C.float)(ptr(out.LSE)), C.int32_t(level), C.int32_t(opt.Threads), &errBuf[0], C.size_t(len(errBuf)))
	if rc != 0 {
		return errors.New("linear logprob: " + C.GoString(&errBuf[0]))
	}
	return nil
}

// errBufs recycles the buffers C copies error messages into: a Go buffer passed to C escapes
// to the heap, and the hot path must not allocate (TestComputeDoesNotAllocate).
var errBufs = sync.Pool{New: func() any { return new([256]C.char) }}

func getErrBuf() *[256]C.char { return errBufs.Get().(*[256]C.char) }

// ptr is the address of s's first element, nil for an empty slice.
func ptr[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}
