package logprob

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"needle/cuda"
	"needle/testkit/cudatest"
)

// BenchmarkGPU times logprob.cu on logits already in device memory (the trainer's case: the
// logits come out of the model on the GPU), one launch per op (queued, then waited for), at the trainer's goal shape (bf16,
// N=16384, Qwen2.5's V=151936) and smaller f32/f16 ones. SetBytes is the logits size, so MB/s
// reads as the logits read rate, to compare with the device's read bandwidth that the GPU check
// measures with torch in the same run. Skips without a CUDA device.
func BenchmarkGPU(b *testing.B) {
	g := cudatest.Open(b, NewGPU)
	for _, c := range []struct {
		dtype       DType
		rows, vocab int
	}{{BF16, 16384, 151936}, {F16, 4096, 151936}, {F32, 4096, 151936}} {
		b.Run(fmt.Sprintf("%v/N=%d/V=%d", c.dtype, c.rows, c.vocab), func(b *testing.B) {
			benchGPU(b, g, c.dtype, c.rows, c.vocab)
		})
	}
}

func benchGPU(b *testing.B, g *GPU, dtype DType, rows, vocab int) {
	host := randomLogits(dtype, rows*vocab)
	labels := make([]int64, rows)
	for i := range labels {
		labels[i] = int64(i*7919) % int64(vocab)
	}
	var bufs []*cuda.Buffer
	defer func() {
		for _, buf := range bufs {
			buf.Free()
		}
	}()
	alloc := func(size int, src unsafe.Pointer) *cuda.Buffer {
		buf, err := g.dev.Alloc(size)
		if err != nil {
			b.Fatal(err)
		}
		bufs = append(bufs, buf)
		if src != nil {
			if err := buf.Upload(src, size); err != nil {
				b.Fatal(err)
			}
		}
		return buf
	}
	dLogits := alloc(len(host), unsafe.Pointer(&host[0]))
	dLabels := alloc(8*rows, unsafe.Pointer(&labels[0]))
	outs := [3]*cuda.Buffer{alloc(4*rows, nil), alloc(4*rows, nil), alloc(4*rows, nil)}
	b.SetBytes(int64(len(host)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := errors.Join(g.launch(dtype, rows, vocab, dLogits, dLabels, DefaultOptions(), outs), g.dev.Synchronize()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// The timed launches must have computed something sane: a finite input never gives a
	// positive log-prob.
	lp := make([]float32, rows)
	if err := outs[0].Download(unsafe.Pointer(&lp[0]), 4*rows); err != nil {
		b.Fatal(err)
	}
	for i, v := range lp {
		if !(v <= 0) {
			b.Fatalf("row %d: logprob %v", i, v)
		}
	}
}

// randomLogits fills n logits of dtype with values spread over [-8, 8) by a xorshift generator
// per goroutine (math/rand's normal floats would take minutes at the goal shape's 2.5e9 values).
func randomLogits(dtype DType, n int) []byte {
	out := make([]byte, n*dtype.Size())
	workers := runtime.NumCPU()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			state := uint64(w)*0x9E3779B97F4A7C15 + 1
			for i := w * n / workers; i < (w+1)*n/workers; i++ {
				state ^= state << 13
				state ^= state >> 7
				state ^= state << 17
				put(dtype, out, i, float32(state>>40)/float32(1<<24)*16-8)
			}
		}(w)
	}
	wg.Wait()
	return out
}
