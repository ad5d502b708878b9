package faissgo

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"needle/testkit/testvec"
)

// randomVectors returns n unit vectors of dim floats (deterministic per seed).
func randomVectors(n, dim int, seed uint64) []float32 { return testvec.Unit(n, dim, seed) }

// bruteForce is the scalar oracle: the k best rows of db for query q under metric m.
func bruteForce(db, q []float32, dim, k int, m Metric) ([]int64, []float32) {
	n := len(db) / dim
	ids := make([]int64, n)
	score := make([]float32, n)
	for i := 0; i < n; i++ {
		ids[i] = int64(i)
		var s float64
		for j := 0; j < dim; j++ {
			a, b := float64(db[i*dim+j]), float64(q[j])
			if m == IP {
				s += a * b
			} else {
				s += (a - b) * (a - b)
			}
		}
		score[i] = float32(s)
	}
	sort.SliceStable(ids, func(a, b int) bool {
		if m == IP {
			return score[ids[a]] > score[ids[b]]
		}
		return score[ids[a]] < score[ids[b]]
	})
	ids = ids[:k]
	best := make([]float32, k)
	for i, id := range ids {
		best[i] = score[id]
	}
	return ids, best
}

// mustBuild creates, trains (on the data itself) and fills an index, adding in batches of 100.
func mustBuild(t testing.TB, dim int, factory string, m Metric, db []float32) *Index {
	t.Helper()
	x, err := New(dim, factory, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.Close)
	if !x.IsTrained() {
		if err := x.Train(db); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < len(db); i += 100 * dim {
		if err := x.Add(db[i:min(i+100*dim, len(db))]); err != nil {
			t.Fatal(err)
		}
	}
	return x
}

func search(t testing.TB, x *Index, q []float32, k int) ([]float32, []int64) {
	t.Helper()
	n := len(q) / x.Dim()
	dist, labels := make([]float32, n*k), make([]int64, n*k)
	if err := x.Search(q, k, dist, labels); err != nil {
		t.Fatal(err)
	}
	return dist, labels
}

func TestFlatMatchesBruteForce(t *testing.T) {
	const dim, n, nq, k = 48, 1000, 37, 10
	db, q := randomVectors(n, dim, 1), randomVectors(nq, dim, 2)
	for _, m := range []Metric{IP, L2} {
		x := mustBuild(t, dim, "Flat", m, db)
		if x.Ntotal() != n || x.Dim() != dim || x.Metric() != m {
			t.Fatalf("%v: ntotal %d dim %d metric %v", m, x.Ntotal(), x.Dim(), x.Metric())
		}
		dist, labels := search(t, x, q, k)
		for i := 0; i < nq; i++ {
			ids, want := bruteForce(db, q[i*dim:(i+1)*dim], dim, k, m)
			for j := 0; j < k; j++ {
				if math.Abs(float64(dist[i*k+j]-want[j])) > 1e-4 {
					t.Fatalf("%v query %d rank %d: score %g, oracle %g", m, i, j, dist[i*k+j], want[j])
				}
				// Ties aside, the ids agree; compare ids only where scores are distinct.
				if labels[i*k+j] != ids[j] && math.Abs(float64(want[j]-want[min(j+1, k-1)])) > 1e-4 {
					t.Fatalf("%v query %d rank %d: id %d, oracle %d", m, i, j, labels[i*k+j], ids[j])
				}
			}
		}
	}
}

// factoryCases are the index kinds needle builds, sized for a quick test.
// PQ uses 4-bit codes: training 256 centroids per sub-quantizer takes minutes on a loaded
// 2-core machine (measured, also in Python faiss).
var factoryCases = []struct {
	factory, typeName, tag string
	readTypeName           string  // the factory's "Flat" is IndexFlat; FAISS reads it back as IndexFlatIP
	minRecall              float64 // fraction of queries (= db rows) whose top-1 is themselves
}{
	{"Flat", "IndexFlat", "IxFI", "IndexFlatIP", 1},
	{"IVF16,Flat", "IndexIVFFlat", "IwFl", "IndexIVFFlat", 0.9},
	{"HNSW32", "IndexHNSWFlat", "IHNf", "IndexHNSWFlat", 0.95},
	{"SQ8", "IndexScalarQuantizer", "IxSQ", "IndexScalarQuantizer", 0.95},
	{"SQbf16", "IndexScalarQuantizer", "IxSQ", "IndexScalarQuantizer", 0.95},
	// int8 codes of the values cast as they are: this test's values, within ±1, all become codes
	// near 0 and tie; what counts is that the file round-trips.
	{"SQ8_direct_signed", "IndexScalarQuantizer", "IxSQ", "IndexScalarQuantizer", 0},
	{"IVF16,PQ8x4", "IndexIVFPQ", "IwPQ", "IndexIVFPQ", 0.3},
	{"IVF16,SQ8", "IndexIVFScalarQuantizer", "IwSq", "IndexIVFScalarQuantizer", 0.9},
}

func TestFactoriesRoundTrip(t *testing.T) {
	const dim, n, k = 32, 2000, 5
	db := randomVectors(n, dim, 3)
	q := db[:200*dim] // the first 200 rows query themselves
	for _, c := range factoryCases {
		t.Run(c.factory, func(t *testing.T) {
			x := mustBuild(t, dim, c.factory, IP, db)
			if got := x.TypeName(); got != c.typeName {
				t.Errorf("TypeName = %q, want %q", got, c.typeName)
			}
			if err := x.SetSearchParam(searchParam(c.factory), 8); err != nil && searchParam(c.factory) != "" {
				t.Fatal(err)
			}
			dist, labels := search(t, x, q, k)
			hits := 0
			for i := 0; i < 200; i++ {
				if labels[i*k] == int64(i) {
					hits++
				}
			}
			if r := float64(hits) / 200; r < c.minRecall {
				t.Errorf("self-recall@1 = %.2f, want >= %.2f", r, c.minRecall)
			}
			path := filepath.Join(t.TempDir(), "x.faiss")
			if err := x.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			info, err := Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if info != (FileInfo{Type: c.tag, Dim: dim, Ntotal: n, Metric: IP}) {
				t.Errorf("Stat = %+v", info)
			}
			for _, mmap := range []bool{false, true} {
				y, err := Read(path, mmap)
				if err != nil {
					t.Fatal(err)
				}
				defer y.Close()
				if y.TypeName() != c.readTypeName || info.TypeName() != c.readTypeName || y.Ntotal() != n || y.Dim() != dim || y.Metric() != IP {
					t.Fatalf("read back %s ntotal %d dim %d metric %v", y.TypeName(), y.Ntotal(), y.Dim(), y.Metric())
				}
				if p := searchParam(c.factory); p != "" {
					if err := y.SetSearchParam(p, 8); err != nil {
						t.Fatal(err)
					}
				}
				dist2, labels2 := search(t, y, q, k)
				if !slices.Equal(labels, labels2) || !slices.Equal(dist, dist2) {
					t.Fatalf("mmap=%v: results differ after write and read", mmap)
				}
			}
		})
	}
}

// searchParam is the search-time knob of a factory string ("" for exhaustive indexes).
func searchParam(factory string) string {
	switch {
	case strings.HasPrefix(factory, "IVF"):
		return "nprobe"
	case strings.HasPrefix(factory, "HNSW"):
		return "efSearch"
	}
	return ""
}

func TestMmappedIVFIsReadOnly(t *testing.T) {
	db := randomVectors(500, 8, 13)
	x := mustBuild(t, 8, "IVF4,Flat", L2, db)
	path := filepath.Join(t.TempDir(), "ivf.faiss")
	if err := x.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	// The lists stay in the file (FAISS maps them as read-only OnDiskInvertedLists): Add
	// fails cleanly (FAISS itself would terminate the process), where the same file read
	// without mmap takes it.
	for _, mmap := range []bool{false, true} {
		y, err := Read(path, mmap)
		if err != nil {
			t.Fatal(err)
		}
		defer y.Close()
		err = y.Add(db[:8])
		if mmap && (err == nil || !strings.Contains(err.Error(), "read-only")) {
			t.Errorf("Add on an mmapped IVF index: %v", err)
		}
		if !mmap && err != nil {
			t.Errorf("Add on a loaded IVF index: %v", err)
		}
	}
}

func TestLargeIVFFactoryNeedsTraining(t *testing.T) {
	x, err := New(768, "IVF4096,Flat", IP)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if x.IsTrained() || x.TypeName() != "IndexIVFFlat" || x.Dim() != 768 || x.Metric() != IP {
		t.Errorf("IVF4096,Flat: trained %v, %s, dim %d, %v", x.IsTrained(), x.TypeName(), x.Dim(), x.Metric())
	}
	wantErr(t, "train on 100 points", x.Train(randomVectors(100, 768, 1)), "train 100 vectors")
}

func TestSearchParamsChangeResults(t *testing.T) {
	const dim, n = 16, 4000
	db := randomVectors(n, dim, 4)
	q := randomVectors(100, dim, 5)
	x := mustBuild(t, dim, "IVF64,Flat", L2, db)
	if err := x.SetSearchParam("nprobe", 1); err != nil {
		t.Fatal(err)
	}
	_, one := search(t, x, q, 10)
	if err := x.SetSearchParam("nprobe", 64); err != nil {
		t.Fatal(err)
	}
	_, all := search(t, x, q, 10)
	flat := mustBuild(t, dim, "Flat", L2, db)
	_, exact := search(t, flat, q, 10)
	if !slices.Equal(all, exact) {
		t.Error("nprobe=nlist does not give exact results")
	}
	if slices.Equal(one, exact) {
		t.Error("nprobe=1 gives exact results on random data: the parameter had no effect")
	}
	if err := x.SetSearchParam("efSearch", 10); err == nil {
		t.Error("efSearch on an IVF index succeeded")
	}
	for _, v := range []float64{0, -5, 1.5, 1e12, math.NaN()} {
		if err := x.SetSearchParam("nprobe", v); err == nil {
			t.Errorf("nprobe=%g accepted", v)
		}
	}
	if err := x.SetSearchParam("no_such_param", 1); err == nil || !strings.Contains(err.Error(), "no_such_param") {
		t.Errorf("unknown parameter: %v", err)
	}
}

func TestConcurrentSearchMatchesSerial(t *testing.T) {
	const dim, n, k = 32, 3000, 8
	db := randomVectors(n, dim, 6)
	for _, factory := range []string{"Flat", "HNSW32", "IVF32,Flat"} {
		x := mustBuild(t, dim, factory, IP, db)
		queries := make([][]float32, 16)
		want := make([][]int64, len(queries))
		for i := range queries {
			queries[i] = randomVectors(1+i, dim, uint64(100+i)) // batch sizes 1..16
			_, want[i] = search(t, x, queries[i], k)
		}
		var wg sync.WaitGroup
		errs := make(chan string, len(queries)*4)
		for rep := 0; rep < 4; rep++ {
			for i := range queries {
				wg.Add(1)
				go func() {
					defer wg.Done()
					dist, labels := make([]float32, len(want[i])), make([]int64, len(want[i]))
					if err := x.Search(queries[i], k, dist, labels); err != nil {
						errs <- err.Error()
					} else if !slices.Equal(labels, want[i]) {
						errs <- factory + ": concurrent search differs from serial"
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Fatal(e)
		}
	}
}

// TestSearchBatchInvariant: but for a flat index (one sgemm pass, as FAISS does it), a
// query's results are the same bits searched alone or among 99 others: FAISS is called one
// query at a time (needle_search), because its batched coarse assignment and PCA or OPQ transform
// round with the batch.
func TestSearchBatchInvariant(t *testing.T) {
	const dim, n, nq, k = 32, 2000, 100, 10
	db, q := randomVectors(n, dim, 41), randomVectors(nq, dim, 42)
	for _, c := range []struct{ factory, param string }{{"HNSW32", "efSearch"}, {"IVF64,Flat", "nprobe"}, {"PCAR16,IVF64,SQ8", "nprobe"}} {
		factory := c.factory
		x := mustBuild(t, dim, factory, IP, db)
		if err := x.SetSearchParam(c.param, 8); err != nil {
			t.Fatal(err)
		}
		bd, bl := search(t, x, q, k)
		for _, i := range []int{0, 37, 99} {
			ad, al := search(t, x, q[i*dim:(i+1)*dim], k)
			for j := range k {
				if al[j] != bl[i*k+j] || math.Float32bits(ad[j]) != math.Float32bits(bd[i*k+j]) {
					t.Fatalf("%s: query %d result %d: (%d, %g) alone, (%d, %g) among %d", factory, i, j, al[j], ad[j], bl[i*k+j], bd[i*k+j], nq)
				}
			}
		}
	}
}

func TestSearchDoesNotAllocate(t *testing.T) {
	x := mustBuild(t, 16, "Flat", IP, randomVectors(100, 16, 8))
	q := randomVectors(4, 16, 9)
	dist, labels := make([]float32, 4*5), make([]int64, 4*5)
	allocs := testing.AllocsPerRun(50, func() {
		if err := x.Search(q, 5, dist, labels); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Search allocates %.1f times per call", allocs)
	}
}

// NaN, infinite and huge values are refused before FAISS sees them (an IVF index aborts the
// process on a NaN vector, and on a query whose squared norm overflows when nprobe is 1).
func TestNonFiniteVectorsAreRefused(t *testing.T) {
	const dim = 8
	db := randomVectors(300, dim, 14)
	for _, factory := range []string{"Flat", "HNSW8", "IVF4,Flat", "OPQ2_4,IVF4,PQ2x4np"} {
		x := mustBuild(t, dim, factory, L2, db)
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1)), 3e38, -2e9} {
			v := slices.Clone(db[:2*dim])
			v[dim+3] = bad
			wantErr(t, factory+" add", x.Add(v), "vector 1 has", "position 3")
			d, l := make([]float32, 2*5), make([]int64, 2*5)
			wantErr(t, factory+" search", x.Search(v, 5, d, l), "vector 1 has")
		}
		if x.Ntotal() != 300 {
			t.Errorf("%s: ntotal %d after refused adds", factory, x.Ntotal())
		}
	}
	ivf, err := New(dim, "IVF4,Flat", L2)
	if err != nil {
		t.Fatal(err)
	}
	defer ivf.Close()
	v := slices.Clone(db)
	v[0] = float32(math.NaN())
	wantErr(t, "train", ivf.Train(v), "vector 0 has NaN")
}

func TestParseMetric(t *testing.T) {
	for s, want := range map[string]Metric{"IP": IP, "ip": IP, "inner_product": IP, "L2": L2, "l2": L2} {
		if m, err := ParseMetric(s); err != nil || m != want {
			t.Errorf("ParseMetric(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := ParseMetric("cosine"); err == nil {
		t.Error("ParseMetric(cosine) succeeded")
	}
	if IP.String() != "IP" || L2.String() != "L2" {
		t.Error("Metric.String")
	}
}

func TestMain(m *testing.M) {
	Init(2)
	os.Exit(m.Run())
}
