package delta

import (
	"bytes"
	"fmt"
	"testing"
	"unsafe"

	"needle/cuda"
	"needle/testkit/cudatest"
	"needle/testkit/weightstest"
)

// TestPTXEmbedded checks that the build embedded the PTX and the fatbin of delta.cu with every
// entry point.
func TestPTXEmbedded(t *testing.T) {
	var entries []string
	for _, name := range []string{"count", "write", "apply"} {
		entries = append(entries, "nl_cuda_delta_"+name+"16", "nl_cuda_delta_"+name+"32")
	}
	cudatest.CheckKernels(t, ptxFiles, kernelStem, entries...)
}

// TestGPUMatchesCPU runs delta.cu on a real GPU: its Encode must give the CPU Encode's bytes, and
// its Apply must rebuild the new tensor bit for bit. Skips without a CUDA device.
func TestGPUMatchesCPU(t *testing.T) {
	g := cudatest.Open(t, NewGPU)
	t.Logf("kernels: %s", g.mod.Image)
	// Edge sizes around one tile and past several, beside the CPU tests' sizes; -test.short (the
	// emulated driver, whose launches are thousands of times slower) keeps the edges.
	gpuSizes := append([]int{cudaTile - 1, cudaTile, cudaTile + 1, 5*cudaTile + 3, 1 << 20}, sizes...)
	if testing.Short() {
		gpuSizes = []int{0, 1, 33, cudaTile - 1, cudaTile, cudaTile + 1, 5*cudaTile + 3}
	}
	for _, es := range []int{2, 4} {
		for _, n := range gpuSizes {
			for _, frac := range []float64{0, 0.01, 1} {
				oldBits, newBits := weightstest.Pair(n, es, frac, uint64(n)+5)
				var want, got Sparse
				if err := Encode(&want, oldBits, newBits, es, 1); err != nil {
					t.Fatal(err)
				}
				dOld, dNew := upload(t, g.dev, oldBits), upload(t, g.dev, newBits)
				if err := g.Encode(&got, dOld, dNew, int64(n), es); err != nil {
					t.Fatalf("es=%d n=%d frac=%v: %v", es, n, frac, err)
				}
				if got.Len != want.Len || got.IndexSize != want.IndexSize || !bytes.Equal(got.Indices, want.Indices) || !bytes.Equal(got.Values, want.Values) {
					t.Fatalf("es=%d n=%d frac=%v: GPU encode has %d entries, CPU %d, or they differ", es, n, frac, got.Count(), want.Count())
				}
				if err := g.Apply(dOld, len(oldBits), &got); err != nil {
					t.Fatal(err)
				}
				applied := make([]byte, len(oldBits))
				if n > 0 {
					if err := dOld.Download(unsafe.Pointer(&applied[0]), len(applied)); err != nil {
						t.Fatal(err)
					}
				}
				if !bytes.Equal(applied, newBits) {
					t.Fatalf("es=%d n=%d frac=%v: GPU apply differs from new", es, n, frac)
				}
			}
		}
	}
}

// BenchmarkGPU: a 1 GiB bf16 tensor (2^29 elements) in device memory at the changed shares of
// one RL step. Encode's bytes/s counts both inputs (what it must read; the kernels read them
// twice, count then write) and includes copying the entries to the host; Apply's counts the
// entries it scatters. Compare with the device's read bandwidth that the GPU check measures.
func BenchmarkGPU(b *testing.B) {
	g := cudatest.Open(b, NewGPU)
	const n = 1 << 29
	for _, frac := range benchFractions {
		oldBits, newBits := weightstest.Pair(n, 2, frac, 1)
		dOld, dNew := upload(b, g.dev, oldBits), upload(b, g.dev, newBits)
		var s Sparse
		b.Run(fmt.Sprintf("encode/bf16-%.1fpct", 100*frac), func(b *testing.B) {
			b.SetBytes(2 * int64(len(oldBits)))
			for b.Loop() {
				if err := g.Encode(&s, dOld, dNew, n, 2); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("apply/bf16-%.1fpct", 100*frac), func(b *testing.B) {
			b.SetBytes(s.Count() * int64(s.IndexSize+s.ElemSize))
			for b.Loop() {
				if err := g.Apply(dOld, len(oldBits), &s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// upload copies b to a new device buffer freed when the test ends.
func upload(tb testing.TB, dev *cuda.Device, b []byte) *cuda.Buffer {
	d, err := dev.Alloc(len(b))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Free() })
	if len(b) > 0 {
		if err := d.Upload(unsafe.Pointer(&b[0]), len(b)); err != nil {
			tb.Fatal(err)
		}
	}
	return d
}

// TestWithoutGPUEmulatedDriver runs TestGPUMatchesCPU through package cuda against the emulated
// driver (libcudaemu_driver.so: delta.cu under cudaemu on the CPU): the launches' argument
// layouts, the tile counts and offsets, the copies; not the GPU (that is the GPU check's).
func TestWithoutGPUEmulatedDriver(t *testing.T) {
	cudatest.RunEmulated(t, "TestGPUMatchesCPU")
}
