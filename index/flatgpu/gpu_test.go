package flatgpu

// GPU tests: they skip (saying why) without a CUDA device and cuBLAS, or fail under
// NEEDLE_REQUIRE_GPU=1 (the GPU check). NEVER RUN ON A GPU so far: written and compiled on a
// machine without one (see docs/gpu.md).

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"needle/faissgo"
	"needle/internal/half"
	"needle/kernels/search/flatscangpu"
	"needle/testkit/cudatest"
	"needle/testkit/testflat"
)

// reference is the exact (float64) top-k of queries over db: scores in the order of the
// device (better first, lower label first), NaN rows never hits.
func reference(db, q []float32, dim, k int, l2 bool) ([]int64, []float64) {
	n, nq := len(db)/dim, len(q)/dim
	labels, scores := make([]int64, 0, nq*k), make([]float64, 0, nq*k)
	type hit struct {
		s float64
		l int64
	}
	for i := range nq {
		hits := make([]hit, 0, n)
		for j := range n {
			var s float64
			for c := range dim {
				x, y := float64(q[i*dim+c]), float64(db[j*dim+c])
				if l2 {
					s += (x - y) * (x - y)
				} else {
					s += x * y
				}
			}
			if !math.IsNaN(s) {
				hits = append(hits, hit{s, int64(j)})
			}
		}
		slices.SortFunc(hits, func(a, b hit) int {
			if a.s != b.s {
				if l2 {
					return cmp.Compare(a.s, b.s)
				}
				return cmp.Compare(b.s, a.s)
			}
			return cmp.Compare(a.l, b.l)
		})
		for j := range k {
			labels, scores = append(labels, hits[j].l), append(scores, hits[j].s)
		}
	}
	return labels, scores
}

// TestGPUParity: fp16 and fp32 indexes, IP and L2, one shard and two shards on the same GPU
// (the cross-shard merge), against the exact float64 search of the same (fp16-rounded)
// vectors: every hit's score equals the reference's score at its rank within rounding (ids
// may differ only where scores tie that closely), a row of NaN is never a hit, and recall@10
// against FAISS's fp32 search of the original vectors is reported and checked.
func TestGPUParity(t *testing.T) {
	cudatest.DeviceWithBLAS(t)
	n, dim, nq := 20011, 768, 37
	if testing.Short() { // the emulated driver: its GEMM and launches run on the CPU
		n, dim, nq = 300, 64, 3
	}
	db, q := randomVectors(7, n, dim), randomVectors(8, nq, dim)
	for c := range dim {
		db[123*dim+c] = float32(math.NaN())
	}
	for _, m := range []faissgo.Metric{faissgo.IP, faissgo.L2} {
		// Written directly: FAISS's Add (writeIndex) refuses the NaN row.
		path := filepath.Join(t.TempDir(), "index.faiss")
		testflat.WriteFlat(t, path, m, dim, int64(n), testflat.Rows(db, dim))
		cpu, err := faissgo.Read(path, false)
		if err != nil {
			t.Fatal(err)
		}
		defer cpu.Close()
		for _, fp32 := range []bool{false, true} {
			rdb, rq := db, q
			if !fp32 {
				rdb, rq = make([]float32, len(db)), make([]float32, len(q))
				for i, v := range db {
					rdb[i] = half.ToFloat32(half.FromFloat32(v))
				}
				for i, v := range q {
					rq[i] = half.ToFloat32(half.FromFloat32(v))
				}
			}
			const maxk = 100
			wl, ws := reference(rdb, rq, dim, maxk, m == faissgo.L2)
			for _, devices := range [][]int{{0}, {0, 0}} {
				x, err := Load(path, Options{Devices: devices, FP32: fp32})
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range []int{1, 10, maxk} {
					name := fmt.Sprintf("%v fp32=%v shards=%d k=%d", m, fp32, len(devices), k)
					dist, labels := make([]float32, nq*k), make([]int64, nq*k)
					if err := x.Search(q, k, dist, labels); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					for i := range labels {
						ref := (i/k)*maxk + i%k // the reference's hit at the same rank
						if labels[i] == 123 {
							t.Fatalf("%s: the NaN row is a hit", name)
						}
						if labels[i] < 0 || labels[i] >= int64(n) {
							t.Fatalf("%s: hit %d has label %d", name, i, labels[i])
						}
						got := 0.0
						l := int(labels[i])
						row, qi := rdb[l*dim:(l+1)*dim], rq[(i/k)*dim:(i/k+1)*dim]
						for c := range dim {
							if m == faissgo.L2 {
								got += float64((qi[c] - row[c]) * (qi[c] - row[c]))
							} else {
								got += float64(qi[c] * row[c])
							}
						}
						tol := 1e-4 * max(1, math.Abs(ws[ref]))
						if math.Abs(got-ws[ref]) > tol || math.Abs(float64(dist[i])-ws[ref]) > tol {
							t.Fatalf("%s: hit %d: label %d (exact score %g, returned %g), reference label %d score %g",
								name, i, labels[i], got, dist[i], wl[ref], ws[ref])
						}
					}
					if k == 10 {
						fd, fl := make([]float32, nq*k), make([]int64, nq*k)
						if err := cpu.Search(q, k, fd, fl); err != nil {
							t.Fatal(err)
						}
						r := recall(labels, fl, nq, k)
						t.Logf("%s: recall@10 vs FAISS fp32 = %.4f", name, r)
						if r < 0.99 {
							t.Errorf("%s: recall@10 vs FAISS fp32 = %.4f < 0.99", name, r)
						}
					}
				}
				x.Close()
			}
		}
	}
}

// recall is the share of want's labels (nq lists of k) found in got's lists.
func recall(got, want []int64, nq, k int) float64 {
	found := 0
	for i := range nq {
		for _, w := range want[i*k : (i+1)*k] {
			if slices.Contains(got[i*k:(i+1)*k], w) {
				found++
			}
		}
	}
	return float64(found) / float64(nq*k)
}

// TestGPUOutOfMemory: an index larger than the GPU is refused at load with what it needs and
// what is free, and the device stays usable.
func TestGPUOutOfMemory(t *testing.T) {
	cudatest.DeviceWithBLAS(t)
	_, err := Synthetic(flatscangpu.MaxGridX, 8192, faissgo.IP, 1, Options{Devices: []int{0}})
	if !errors.Is(err, ErrNoMemory) || !strings.Contains(err.Error(), "GiB free") {
		t.Fatalf("a 32 TiB index: %v", err)
	}
	x, err := Synthetic(1000, 64, faissgo.IP, 1, Options{Devices: []int{0}})
	if err != nil {
		t.Fatalf("a small index after the refused one: %v", err)
	}
	x.Close()
}

// TestGPUTorchParity runs under the GPU check (tools/gpucheck/gpucheck.py), which sets
// NEEDLE_FLATGPU_PARITY to a folder holding index.faiss and queries.f32 (float32, row-major)
// and compares what this writes there (labels_k<K>.i64, dist_k<K>.f32 for K = 10, 8192) with
// torch's fp32 matmul + topk over the same fp16-rounded vectors.
func TestGPUTorchParity(t *testing.T) {
	dir := os.Getenv("NEEDLE_FLATGPU_PARITY")
	if dir == "" {
		t.Skip("runs under the GPU check (NEEDLE_FLATGPU_PARITY names its data folder)")
	}
	cudatest.DeviceWithBLAS(t)
	x, err := Load(filepath.Join(dir, "index.faiss"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	b, err := os.ReadFile(filepath.Join(dir, "queries.f32"))
	if err != nil {
		t.Fatal(err)
	}
	q := make([]float32, len(b)/4)
	for i := range q {
		q[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	nq := len(q) / x.Dim()
	for _, k := range []int{10, MaxK} {
		dist, labels := make([]float32, nq*k), make([]int64, nq*k)
		if err := x.Search(q, k, dist, labels); err != nil {
			t.Fatal(err)
		}
		write := func(name string, p unsafe.Pointer, n int) {
			if err := os.WriteFile(filepath.Join(dir, name), unsafe.Slice((*byte)(p), n), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write(fmt.Sprintf("labels_k%d.i64", k), unsafe.Pointer(&labels[0]), 8*len(labels))
		write(fmt.Sprintf("dist_k%d.f32", k), unsafe.Pointer(&dist[0]), 4*len(dist))
	}
}

// TestWithoutGPUEmulatedDriver runs TestGPUParity (small, -test.short), TestGPUOutOfMemory and
// TestGPUTorchParity (on a small folder of its data, as gpucheck.py writes it) through package
// cuda against the emulated driver and cuBLAS (libcudaemu_driver.so: flatgpu.cu under cudaemu,
// GemmEx as cuBLAS defines it): the GEMM operand layout and transposes, tiles, segments, the
// shard merge, k = 8,192 past the rows, the launches' arguments, on the CPU; not the GPU.
func TestWithoutGPUEmulatedDriver(t *testing.T) {
	cudatest.RunEmulated(t, "TestGPUParity")
	cudatest.RunEmulated(t, "TestGPUOutOfMemory")
	const n, dim, nq = 300, 64, 3
	dir := t.TempDir()
	testflat.WriteFlat(t, filepath.Join(dir, "index.faiss"), faissgo.IP, dim, n, testflat.Rows(randomVectors(5, n, dim), dim))
	q := randomVectors(6, nq, dim)
	if err := os.WriteFile(filepath.Join(dir, "queries.f32"), unsafe.Slice((*byte)(unsafe.Pointer(&q[0])), 4*len(q)), 0o644); err != nil {
		t.Fatal(err)
	}
	cudatest.RunEmulated(t, "TestGPUTorchParity", "NEEDLE_FLATGPU_PARITY="+dir)
	for _, k := range []int{10, MaxK} {
		labels, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("labels_k%d.i64", k)))
		if err != nil || len(labels) != 8*nq*k {
			t.Fatalf("k=%d: %d bytes of labels (%v), want %d", k, len(labels), err, 8*nq*k)
		}
		if k == MaxK && int64(binary.LittleEndian.Uint64(labels[8*n:])) != -1 { // past the rows: no hit
			t.Errorf("k=%d: label %d of query 0 is %d, want -1", k, n, int64(binary.LittleEndian.Uint64(labels[8*n:])))
		}
	}
}
