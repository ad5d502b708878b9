package flatgpu

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"needle/cuda"
	"needle/faissgo"
	"needle/internal/prom"
	"needle/kernels/search/flatscangpu"
	"needle/testkit/cudatest"
)

// randomVectors are n seeded vectors of dim values in [-1, 1).
func randomVectors(seed uint64, n, dim int) []float32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	v := make([]float32, n*dim)
	for i := range v {
		v[i] = rng.Float32()*2 - 1
	}
	return v
}

// writeIndex writes a FAISS index of the factory over vectors to a temp file.
func writeIndex(t testing.TB, factory string, m faissgo.Metric, dim int, vectors []float32) string {
	idx, err := faissgo.New(dim, factory, m)
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	if !idx.IsTrained() {
		if err := idx.Train(vectors); err != nil {
			t.Fatal(err)
		}
	}
	if err := idx.Add(vectors); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "index.faiss")
	if err := idx.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFlatFileFindsTheVectors: the offset FlatFile returns is where FAISS wrote the rows.
func TestFlatFileFindsTheVectors(t *testing.T) {
	v := randomVectors(1, 50, 8)
	for _, m := range []faissgo.Metric{faissgo.IP, faissgo.L2} {
		path, info, err := FlatFile(writeIndex(t, "Flat", m, 8, v))
		off := info.Offset
		if err != nil {
			t.Fatal(err)
		}
		if info.Dim != 8 || info.Ntotal != 50 || info.Metric != m {
			t.Fatalf("%v: FlatFile info %+v", m, info)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range v {
			if got := math.Float32frombits(uint32(b[off+int64(4*i)]) | uint32(b[off+int64(4*i)+1])<<8 | uint32(b[off+int64(4*i)+2])<<16 | uint32(b[off+int64(4*i)+3])<<24); got != want {
				t.Fatalf("%v: value %d at the offset is %g, want %g", m, i, got, want)
			}
		}
	}
}

// TestFlatFileRejects: other index classes, missing files and corrupt files are errors that
// say what is wrong, before any GPU is touched.
func TestFlatFileRejects(t *testing.T) {
	v := randomVectors(2, 300, 8)
	hnsw := writeIndex(t, "HNSW8", faissgo.IP, 8, v)
	if _, _, err := FlatFile(hnsw); err == nil || !strings.Contains(err.Error(), "IndexHNSWFlat is not a flat index") {
		t.Errorf("HNSW file: %v", err)
	}
	if _, _, err := FlatFile(filepath.Join(t.TempDir(), "none.faiss")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	flat := writeIndex(t, "Flat", faissgo.IP, 8, v)
	b, _ := os.ReadFile(flat)
	cut := filepath.Join(t.TempDir(), "cut.faiss")
	os.WriteFile(cut, b[:len(b)-4], 0o644)
	if _, _, err := FlatFile(cut); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("truncated file: %v", err)
	}
	if _, _, err := FlatFile(t.TempDir()); err == nil || !strings.Contains(err.Error(), "manifest") {
		t.Errorf("folder without a manifest: %v", err)
	}
}

// TestLoadWithoutGPU: on a machine without a GPU, Load says so with an error wrapping
// cuda.ErrNoDevice (the server then falls back to the CPU index).
func TestLoadWithoutGPU(t *testing.T) {
	cudatest.WithoutDevice(t)
	path := writeIndex(t, "Flat", faissgo.IP, 8, randomVectors(3, 10, 8))
	for _, opt := range []Options{{}, {Devices: []int{0}}} {
		if _, err := Load(path, opt); !errors.Is(err, cuda.ErrNoDevice) {
			t.Errorf("Load(%+v) without a GPU: %v, want cuda.ErrNoDevice", opt, err)
		}
	}
	if _, err := Synthetic(100, 8, faissgo.IP, 1, Options{}); !errors.Is(err, cuda.ErrNoDevice) {
		t.Errorf("Synthetic without a GPU: %v", err)
	}
}

// TestSyntheticShape: a synthetic index is refused, before any device is opened, past the rows
// one launch can fill (a block per row: gridDim.x <= 2^31 - 1) and for a dimension < 1.
func TestSyntheticShape(t *testing.T) {
	for _, c := range []struct {
		rows int64
		dim  int
	}{{flatscangpu.MaxGridX + 1, 8}, {-1, 8}, {10, 0}} {
		if _, err := Synthetic(c.rows, c.dim, faissgo.IP, 1, Options{}); err == nil || errors.Is(err, cuda.ErrNoDevice) ||
			!strings.Contains(err.Error(), "need 0 <= rows <= 2147483647 (a block per row) and dim > 0") {
			t.Errorf("Synthetic(%d rows x %d): %v", c.rows, c.dim, err)
		}
	}
}

// TestSearchRejectsBadQueries: a wrong dimension, NaN or infinity in a query, k out of range
// or short result buffers are errors naming the problem, checked before any device work
// (this index has no shards: reaching the device would fail differently).
func TestSearchRejectsBadQueries(t *testing.T) {
	x := &Index{dim: 4, ntotal: 10}
	d, l := make([]float32, 20), make([]int64, 20)
	cases := []struct {
		q    []float32
		k    int
		want string
	}{
		{make([]float32, 6), 1, "6 floats is not a whole number of 4-dimensional queries"},
		{[]float32{0, 1, 2, 3, 0, float32(math.NaN()), 0, 0}, 1, "query 1 has NaN at position 1"},
		{[]float32{float32(math.Inf(-1)), 1, 2, 3}, 1, "query 0 has -Inf at position 0"},
		{make([]float32, 4), 0, "k=0 outside 1..8192"},
		{make([]float32, 4), MaxK + 1, "k=8193 outside 1..8192"},
		{make([]float32, 8), 11, "result buffers hold 20 distances and 20 labels, need 22"},
	}
	for _, c := range cases {
		if err := x.Search(c.q, c.k, d, l); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Search(%v, k=%d): %v, want %q", c.q, c.k, err, c.want)
		}
	}
}

// TestMetrics: the /metrics lines of a GPU index (here one without shards, as no GPU
// is needed to format them).
func TestMetrics(t *testing.T) {
	x := &Index{}
	x.searches.Add(3)
	x.nanos.Add(1_500_000_000)
	var b strings.Builder
	prom.NewWriter(&b).Write(x.Telemetry()...)
	for _, want := range []string{"needle_gpu_searches_total 3\n", "needle_gpu_search_seconds_total 1.5\n", "needle_gpu_memory_bytes 0\n", "needle_gpu_healthy 1\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, b.String())
		}
	}
}
