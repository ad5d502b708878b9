package flat

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"needle/faissgo"
	"needle/internal/byteview"
	"needle/internal/gate"
	"needle/internal/procstat"
	"needle/kernels/search/flatscan"
	"needle/testkit/testctx"
	"needle/testkit/testenv"
	"needle/testkit/testflat"
	"needle/testkit/testvec"
)

var floatBytes = byteview.Float32s

// writeFlat writes an index file with faissgo's streaming writer (testvec.WriteFlat).
func writeFlat(t testing.TB, m faissgo.Metric, dim int, db []float32) string {
	path := filepath.Join(t.TempDir(), "go.index")
	testflat.WriteFlat(t, path, m, dim, int64(len(db)/dim), testflat.Rows(db, dim))
	return path
}

// pyFaiss runs faissgo's interop script (Python faiss-cpu of the pinned venv).
func pyFaiss(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(testenv.Python(t), append([]string{"../../faissgo/testdata/interop.py"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("interop.py %v: %v\n%s", args, err, out)
	}
}

// unitGaussians are unit vectors with every tenth row a copy of the one before it, so that
// exact ties occur.
func unitGaussians(n, dim int, seed uint64) []float32 {
	v := testvec.Unit(n, dim, seed)
	for i := 9; i < n; i += 10 {
		copy(v[i*dim:(i+1)*dim], v[(i-1)*dim:i*dim])
	}
	return v
}

var smallInts = testvec.SmallInts

type result struct {
	dist   []float32
	labels []int64
}

func searchIndex(t *testing.T, x interface {
	Search([]float32, int, []float32, []int64) error
}, q []float32, dim, k int) result {
	t.Helper()
	nq := len(q) / dim
	r := result{make([]float32, nq*k), make([]int64, nq*k)}
	if err := x.Search(q, k, r.dist, r.labels); err != nil {
		t.Fatal(err)
	}
	return r
}

func readResult(t *testing.T, path string, nk int) result {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || len(b) != 12*nk {
		t.Fatalf("%s: %d bytes, %v; want %d", path, len(b), err, 12*nk)
	}
	r := result{make([]float32, nk), make([]int64, nk)}
	for i := range nk {
		r.dist[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		r.labels[i] = int64(binary.LittleEndian.Uint64(b[4*nk+8*i:]))
	}
	return r
}

// same requires scores identical (exact: sums of small integers, which every order gets
// right) or within 1e-5 relative (the mapped index's dot products round otherwise than
// FAISS's sgemm, flatscan.h), and identical ids, but where FAISS's own scores of two
// neighbouring results are that close (a near tie may swap).
func same(t *testing.T, what string, got, want result, exact bool) {
	t.Helper()
	tol := func(i int) float64 { return 1e-5 * math.Max(1, math.Abs(float64(want.dist[i]))) }
	near := func(i, j int) bool {
		return j >= 0 && j < len(want.dist) && math.Abs(float64(want.dist[i]-want.dist[j])) <= tol(i)
	}
	for i := range want.labels {
		d := math.Abs(float64(got.dist[i] - want.dist[i]))
		if (exact && d != 0) || d > tol(i) || (got.labels[i] != want.labels[i] && (exact || !near(i, i-1) && !near(i, i+1))) {
			t.Fatalf("%s: result %d: (%d, %g), FAISS (%d, %g)", what, i, got.labels[i], got.dist[i], want.labels[i], want.dist[i])
		}
	}
}

// The mapped index must answer as FAISS's exact search does on the same file: the same ids
// in the same order, exact ties included, for files written by faissgo and by Python faiss.
func TestSameAnswersAsFAISS(t *testing.T) {
	const n, nqMax = 5000, 40
	for _, data := range []struct {
		name string
		dim  int
		gen  func(n, dim int, seed uint64) []float32
	}{{"unit gaussians", 48, unitGaussians}, {"small integers", 6, smallInts}} {
		db, q := data.gen(n, data.dim, 1), data.gen(nqMax, data.dim, 2)
		for _, m := range []faissgo.Metric{faissgo.IP, faissgo.L2} {
			pyPath := filepath.Join(t.TempDir(), "py.index")
			dbPath := filepath.Join(t.TempDir(), "db.f32")
			if err := os.WriteFile(dbPath, floatBytes(db), 0o644); err != nil {
				t.Fatal(err)
			}
			pyFaiss(t, "build", "Flat", m.String(), strconv.Itoa(data.dim), dbPath, pyPath)
			for _, file := range []struct{ who, path string }{{"faissgo", writeFlat(t, m, data.dim, db)}, {"Python faiss", pyPath}} {
				mapped, err := Open(file.path, 2)
				if err != nil {
					t.Fatal(err)
				}
				ref, err := faissgo.Read(file.path, false)
				if err != nil {
					t.Fatal(err)
				}
				for _, nq := range []int{1, 7, nqMax} {
					for _, k := range []int{1, 10, 99} {
						what := data.name + " " + m.String() + " file by " + file.who + " nq=" + strconv.Itoa(nq) + " k=" + strconv.Itoa(k)
						got := searchIndex(t, mapped, q[:nq*data.dim], data.dim, k)
						same(t, what, got, searchIndex(t, ref, q[:nq*data.dim], data.dim, k), data.name == "small integers")
					}
				}
				mapped.Close()
				ref.Close()
			}
			if data.name == "small integers" { // exact scores: Python faiss (the pinned release) must agree too
				qPath, out := filepath.Join(t.TempDir(), "q.f32"), filepath.Join(t.TempDir(), "out")
				if err := os.WriteFile(qPath, floatBytes(q), 0o644); err != nil {
					t.Fatal(err)
				}
				pyFaiss(t, "search", pyPath, strconv.Itoa(data.dim), qPath, "10", "-", "0", out)
				mapped, err := Open(pyPath, 2)
				if err != nil {
					t.Fatal(err)
				}
				same(t, "Python faiss's own search, "+m.String(), searchIndex(t, mapped, q, data.dim, 10), readResult(t, out, nqMax*10), true)
				mapped.Close()
			}
		}
	}
}

// SearchContext gives Search's answers while ctx lives, and checks ctx between stripes: a
// context that ends after the first stripe stops the search of two.
func TestSearchContextStopsBetweenStripes(t *testing.T) {
	const dim = 4
	n := flatscan.StripeRows(1, dim) + 10 // two stripes for one query
	x, err := Open(writeFlat(t, faissgo.IP, dim, unitGaussians(n, dim, 3)), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	q := unitGaussians(1, dim, 4)
	want := searchIndex(t, x, q, dim, 5)
	got := result{make([]float32, 5), make([]int64, 5)}
	if err := x.SearchContext(testctx.LiveFor(2), q, 5, got.dist, got.labels); err != nil {
		t.Fatal(err)
	}
	same(t, "SearchContext with a live context", got, want, true)
	if err := x.SearchContext(testctx.LiveFor(1), q, 5, got.dist, got.labels); !errors.Is(err, context.Canceled) {
		t.Errorf("a context that ended after the first stripe: %v, want context.Canceled", err)
	}
}

// A search whose context carries a gate (the server's bulk work) waits at it before each stripe
// while interactive work holds it, and a search without one (a single query's) runs meanwhile
// on the same index; both give Search's answers.
func TestSearchWaitsAtTheGate(t *testing.T) {
	const dim, k = 4, 5
	n := flatscan.StripeRows(8, dim) + 10 // two stripes for 8 queries
	x, err := Open(writeFlat(t, faissgo.IP, dim, unitGaussians(n, dim, 3)), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	bulkQ, singleQ := unitGaussians(8, dim, 4), unitGaussians(1, dim, 5)
	wantBulk, wantSingle := searchIndex(t, x, bulkQ, dim, k), searchIndex(t, x, singleQ, dim, k)
	var g gate.Gate
	u, err := g.Begin(context.Background(), true) // as the server's batcher begins a bulk search
	if err != nil {
		t.Fatal(err)
	}
	ctx := gate.With(context.Background(), u)
	g.Enter() // a single query is waiting
	bulk := result{make([]float32, 8*k), make([]int64, 8*k)}
	done := make(chan error)
	go func() { done <- x.SearchContext(ctx, bulkQ, k, bulk.dist, bulk.labels) }()
	for g.Pauses() == 0 { // the bulk search waits at its first stripe
		runtime.Gosched()
	}
	same(t, "the single query's search while the bulk search waits", searchIndex(t, x, singleQ, dim, k), wantSingle, true)
	g.Leave()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	u.End()
	same(t, "the bulk search after it waited", bulk, wantBulk, true)
}

// Opening and searching a 256 MB index must not take anonymous memory near its size (FAISS
// would read it all into RAM): only a stripe of scores and the results.
func TestMemoryStaysBounded(t *testing.T) {
	const dim, n, nq, k, bound = 256, 1 << 18, 16, 10, 48 << 20
	path := filepath.Join(t.TempDir(), "big.index")
	chunk := unitGaussians(8192, dim, 3) // streamed: the test itself must not hold the index either
	testflat.WriteFlat(t, path, faissgo.IP, dim, n, func(int64, int64) []float32 { return chunk })
	q := unitGaussians(nq, dim, 4)
	runtime.GC()
	debug.FreeOSMemory()
	before := procstat.KB("RssAnon") << 10
	x, err := Open(path, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	want := searchIndex(t, x, q, dim, k)
	if want.labels[k-1] < 0 {
		t.Fatalf("query 0 found %v", want.labels[:k])
	}
	after := procstat.KB("RssAnon") << 10
	t.Logf("index %d MB, anonymous memory %+d kB after open and search", (int64(n)*dim*4)>>20, (after-before)>>10)
	if after-before > bound {
		t.Fatalf("anonymous memory grew by %d MB searching a %d MB index (bound %d MB)", (after-before)>>20, (int64(n)*dim*4)>>20, bound>>20)
	}

	// As for a file larger than half of RAM: windows read ahead, scanned, then dropped (two
	// windows here). Same answers, and the mapped pages leave the process as they are passed.
	x.dropBehind = true
	mapped := procstat.KB("RssFile") << 10
	same(t, "search dropping behind", searchIndex(t, x, q, dim, k), want, true)
	if left := procstat.KB("RssFile") << 10; left > mapped-int64(n)*dim*4/2 {
		t.Errorf("file-backed memory %d MB after a search dropping behind, %d MB before: the windows were not dropped", left>>20, mapped>>20)
	}
}

func TestBadFiles(t *testing.T) {
	db := unitGaussians(100, 8, 1)
	path := writeFlat(t, faissgo.IP, 8, db)
	b, _ := os.ReadFile(path)
	cut := filepath.Join(t.TempDir(), "cut.index")
	os.WriteFile(cut, b[:len(b)-3], 0o644)
	if _, err := Open(cut, 1); err == nil || !strings.Contains(err.Error(), "is 3245 bytes") {
		t.Errorf("truncated file: %v", err)
	}
	hnsw, err := faissgo.New(8, "HNSW8", faissgo.IP)
	if err != nil {
		t.Fatal(err)
	}
	hnsw.Add(db)
	hnswPath := filepath.Join(t.TempDir(), "hnsw.index")
	if err := hnsw.WriteFile(hnswPath); err != nil {
		t.Fatal(err)
	}
	hnsw.Close()
	if _, err := Open(hnswPath, 1); err == nil || !strings.Contains(err.Error(), "IndexHNSWFlat is not a flat index") {
		t.Errorf("HNSW file: %v", err)
	}
	// A file truncated while served: the search fails with a clear error instead of a fault.
	x, err := Open(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if err := os.Truncate(path, 100); err != nil {
		t.Fatal(err)
	}
	d, l := make([]float32, 3), make([]int64, 3)
	if err := x.Search(db[:8], 3, d, l); err == nil || !strings.Contains(err.Error(), "changed size while served") {
		t.Errorf("truncated while served: %v", err)
	}
	if err := x.Search(db[:7], 3, d, l); err == nil {
		t.Error("ragged query: no error")
	}
}
