package compact

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"

	"needle/faissgo"
	"needle/index/flat"
	"needle/index/indexdir"
	"needle/internal/byteview"
	"needle/internal/gate"
	"needle/internal/option"
	"needle/internal/procstat"
	"needle/testkit/testctx"
	"needle/testkit/testenv"
	"needle/testkit/testflat"
	"needle/testkit/testvec"
)

// writeFlat writes a FAISS flat index file in dir (testvec.WriteFlat) and returns its path.
func writeFlat(t testing.TB, dir string, m faissgo.Metric, dim int, n int64, rows func(start, n int64) []float32) string {
	path := filepath.Join(dir, "flat.index")
	testflat.WriteFlat(t, path, m, dim, n, rows)
	return path
}

var fixed = testflat.Rows

func convert(t testing.TB, cfg Config) *Report {
	t.Helper()
	rep, err := Convert(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func open(t testing.TB, dir string, opt Options) *Index {
	t.Helper()
	x, err := Open(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.Close)
	return x
}

type searcher interface {
	Search(q []float32, k int, dist []float32, labels []int64) error
}

func search(t testing.TB, x searcher, q []float32, dim, k int) ([]float32, []int64) {
	t.Helper()
	dist, labels := make([]float32, len(q)/dim*k), make([]int64, len(q)/dim*k)
	if err := x.Search(q, k, dist, labels); err != nil {
		t.Fatal(err)
	}
	return dist, labels
}

// exact is the mapped flat index's answer (FAISS's IndexFlat search, ties included).
func exact(t testing.TB, path string, q []float32, dim, k int) ([]float32, []int64) {
	t.Helper()
	x, err := flat.Open(path, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	return search(t, x, q, dim, k)
}

// recallAt10 is the mean share of each query's exact top 10 among its first 10 labels.
func recallAt10(got, want []int64, k int) float64 {
	hits, nq := 0, len(want)/k
	for i := range nq {
		for _, g := range got[i*k : i*k+10] {
			for _, w := range want[i*k : i*k+10] {
				if g == w {
					hits++
				}
			}
		}
	}
	return float64(hits) / float64(10*nq)
}

// With every row a candidate (all lists probed, Rescore = rows), re-scoring is an exact
// search: the ids and scores of FAISS's IndexFlat search, ties included (small-integer
// vectors: exact scores, many ties), for IP and L2.
func TestRescoringEveryRowIsExact(t *testing.T) {
	const n, dim, nq, k = 2000, 32, 50, 20
	db, q := testvec.SmallInts(n, dim, 1), testvec.SmallInts(nq, dim, 2)
	for _, m := range []faissgo.Metric{faissgo.IP, faissgo.L2} {
		dir := t.TempDir()
		src := writeFlat(t, dir, m, dim, n, fixed(db, dim))
		out := filepath.Join(dir, "form")
		rep := convert(t, Config{From: src, Out: out, Factory: "IVF16,PQ8x4np", TrainSize: n, Rescore: n, Nprobe: 16})
		if rep.Form.Metric != strings.ToLower(m.String()) || rep.Rows != n || rep.ResumedFrom != 0 {
			t.Fatalf("%v: report %+v", m, rep)
		}
		x := open(t, out, Options{Threads: 2})
		gd, gl := search(t, x, q, dim, k)
		wd, wl := exact(t, src, q, dim, k)
		for i := range wl {
			if gl[i] != wl[i] || gd[i] != wd[i] {
				t.Fatalf("%v: result %d: (%d, %g), exact (%d, %g)", m, i, gl[i], gd[i], wl[i], wd[i])
			}
		}
	}
}

// On clustered unit vectors (as text embeddings are), the default kind of form (OPQ, IVF-PQ,
// re-scoring) finds the exact top 10 at recall >= 0.95 while scanning a fraction of the lists,
// and re-scoring is what gets it there: the codes' own top 10 are worse.
func TestRecallOnClusteredVectors(t *testing.T) {
	const n, dim, nq, k = 20000, 64, 200, 10
	dir := t.TempDir()
	src := writeFlat(t, dir, faissgo.IP, dim, n, fixed(testvec.Clustered(n, dim, 1, 0), dim))
	q := testvec.Clustered(nq, dim, 1, 1)
	out := filepath.Join(dir, "form")
	convert(t, Config{From: src, Out: out, Factory: "OPQ16_32,IVF64,PQ16np", TrainSize: 2000, Rescore: 100, Nprobe: 16})
	_, want := exact(t, src, q, dim, k)
	gd, rescored := search(t, open(t, out, Options{Threads: 2}), q, dim, k)
	_, codes := search(t, open(t, out, Options{Threads: 2, Rescore: -1}), q, dim, k)
	withRescore, without := recallAt10(rescored, want, k), recallAt10(codes, want, k)
	t.Logf("recall@10: %.3f re-scored, %.3f from the codes alone", withRescore, without)
	if withRescore < 0.95 || withRescore <= without {
		t.Errorf("recall@10 %.3f re-scored (want >= 0.95), %.3f from the codes alone (want less)", withRescore, without)
	}
	for i := 1; i < len(gd); i++ { // exact scores, best first
		if i%k != 0 && gd[i] > gd[i-1] {
			t.Fatalf("scores %v not in order", gd[i-k+1:i+1])
		}
	}
}

// Python faiss (the pinned venv's, a newer FAISS) reads index.faiss and finds what the codes
// give here.
func TestPythonFaissReadsTheForm(t *testing.T) {
	py := testenv.Python(t)
	const n, dim, nq, k = 5000, 32, 20, 10
	dir := t.TempDir()
	src := writeFlat(t, dir, faissgo.IP, dim, n, fixed(testvec.Clustered(n, dim, 2, 0), dim))
	out := filepath.Join(dir, "form")
	convert(t, Config{From: src, Out: out, Factory: "OPQ8_16,IVF32,PQ8np", TrainSize: 2000, Nprobe: 4})
	q := testvec.Clustered(nq, dim, 2, 1)
	_, ours := search(t, open(t, out, Options{Threads: 2, Rescore: -1}), q, dim, k)
	qpath, res := filepath.Join(dir, "q.f32"), filepath.Join(dir, "res.bin")
	os.WriteFile(qpath, byteview.Float32s(q), 0o644)
	cmd := exec.Command(py, "../../faissgo/testdata/interop.py", "search", filepath.Join(out, IndexFileName), "32", qpath, "10", "nprobe", "4", res)
	if msg, err := cmd.CombinedOutput(); err != nil || !strings.HasPrefix(string(msg), "IndexPreTransform 5000 ") {
		t.Fatalf("interop.py: %v\n%s", err, msg)
	}
	b, err := os.ReadFile(res)
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	for i := range ours {
		if int64(binary.LittleEndian.Uint64(b[4*nq*k+8*i:])) == ours[i] {
			same++
		}
	}
	if same < len(ours)*95/100 {
		t.Errorf("Python faiss agrees with faissgo on %d of %d labels", same, len(ours))
	}
}

// Serving a form holds the codes, not the source: searching with re-scoring reads only the
// candidates' rows, so anonymous memory grows by about the codes' size, far under the
// source's. (The conversion's own memory is checked on the needle binary: cmd/needle.)
func TestServingMemoryStaysBounded(t *testing.T) {
	const dim, n = 256, 1 << 18 // 256 MB of fp32
	dir := t.TempDir()
	chunk := testvec.Clustered(8192, dim, 3, 0)
	src := writeFlat(t, dir, faissgo.IP, dim, n, func(int64, int64) []float32 { return chunk })
	out := filepath.Join(dir, "form")
	rep := convert(t, Config{From: src, Out: out, Factory: "IVF16,PQ32x4np", TrainSize: 2000})
	runtime.GC()
	debug.FreeOSMemory()
	before := procstat.KB("RssAnon") << 10
	x := open(t, out, Options{Threads: 2})
	search(t, x, testvec.Clustered(64, dim, 3, 1), dim, 10)
	grew := procstat.KB("RssAnon")<<10 - before
	t.Logf("source %d MB, codes %d MB: anonymous memory +%d MB after open and a re-scored search", int64(n)*dim*4>>20, rep.IndexBytes>>20, grew>>20)
	if grew > rep.IndexBytes+48<<20 {
		t.Errorf("serving took %d MB of anonymous memory for %d MB of codes over a %d MB source", grew>>20, rep.IndexBytes>>20, int64(n)*dim*4>>20)
	}
}

// Bad sources and folders get errors that say what is wrong.
func TestConvertErrors(t *testing.T) {
	const n, dim = 3000, 16
	dir := t.TempDir()
	src := writeFlat(t, dir, faissgo.IP, dim, n, fixed(testvec.Clustered(n, dim, 4, 0), dim))
	ivf, err := faissgo.New(dim, "IVF4,Flat", faissgo.IP)
	if err != nil {
		t.Fatal(err)
	}
	defer ivf.Close()
	v := testvec.Unit(100, dim, 1)
	if err := ivf.Train(v); err != nil || ivf.Add(v) != nil {
		t.Fatal(err)
	}
	ivfPath := filepath.Join(dir, "ivf.index")
	if err := ivf.WriteFile(ivfPath); err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.index")
	b, _ := os.ReadFile(src)
	os.WriteFile(truncated, b[:len(b)-100], 0o644)
	memmap := filepath.Join(dir, "emb.memmap")
	os.WriteFile(memmap, b[faissgo.FlatHeaderBytes:], 0o644)
	out := filepath.Join(dir, "form")
	base := Config{Factory: "IVF4,PQ4x4np", TrainSize: 1000}
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"another FAISS class", Config{From: ivfPath}, "a FAISS IndexIVFFlat, not a flat index: embeddings are read from IndexFlatIP, IndexFlatL2"},
		{"truncated", Config{From: truncated}, "file is 191945 bytes, a flat index of 3000 vectors of dimension 16 is 192045 bytes"},
		{"memmap without a dimension", Config{From: memmap}, "Dim: required"},
		{"memmap of another width", Config{From: memmap, Dim: 7}, "not a whole number of float32 rows of dim 7"},
		{"metric against the file's", Config{From: src, Metric: "l2"}, "Metric: l2, but"},
		{"unknown factory", Config{From: src, Factory: "IVF4,Nonsense"}, "Nonsense"},
	} {
		cfg := base
		cfg.From, cfg.Dim, cfg.Metric, cfg.Out = c.cfg.From, c.cfg.Dim, c.cfg.Metric, filepath.Join(dir, "bad-"+strings.ReplaceAll(c.name, " ", "-"))
		if c.cfg.Factory != "" {
			cfg.Factory = c.cfg.Factory
		}
		if _, err := Convert(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	// A memmap converts with Dim; its form is up to date on rerun, and another factory
	// in the same folder is refused without Restart.
	cfg := base
	cfg.From, cfg.Dim, cfg.Out = memmap, dim, out
	if rep := convert(t, cfg); rep.Form.Source.Offset != 0 || rep.Form.Metric != "ip" {
		t.Errorf("memmap form %+v", rep.Form)
	}
	if rep := convert(t, cfg); !rep.UpToDate {
		t.Error("rerun: not up to date")
	}
	other := cfg
	other.Factory = "IVF4,PQ8x4np"
	if _, err := Convert(other); !option.FixedBy(err, "Restart") {
		t.Errorf("another factory: %v, want an error that Restart fixes", err)
	}
	other.Restart = true
	if rep := convert(t, other); rep.UpToDate || rep.Form.Factory != "IVF4,PQ8x4np" {
		t.Errorf("--restart: %+v", rep)
	}
	// A source changed after the conversion is not re-scored from.
	os.WriteFile(memmap, b[faissgo.FlatHeaderBytes+4*dim:], 0o644)
	if _, err := Open(out, Options{}); err == nil || !strings.Contains(err.Error(), "changed since the conversion") {
		t.Errorf("open with a changed source: %v", err)
	}
	if x, err := Open(out, Options{Rescore: -1}); err != nil {
		t.Errorf("open without re-scoring: %v", err)
	} else {
		x.Close()
	}
}

// A write that fails for want of space (here the file size limit, which fails writes as a
// full disk does) stops the conversion with the OS's message and leaves no form, only the
// last checkpoint; a rerun with space resumes from it and ends with the bytes of an
// uninterrupted conversion.
func TestFullDiskLeavesNoHalfWrittenForm(t *testing.T) {
	const n, dim = 8 * indexdir.ChunkRows, 16
	dir := t.TempDir()
	src := writeFlat(t, dir, faissgo.IP, dim, n, fixed(testvec.Clustered(n, dim, 5, 0), dim))
	cfg := Config{From: src, Factory: "IVF16,PQ8np", TrainSize: 10000, CheckpointRows: 2 * indexdir.ChunkRows}
	whole := cfg
	whole.Out = filepath.Join(dir, "whole")
	want := convert(t, whole)
	cfg.Out = filepath.Join(dir, "full")

	// Codes and ids take 16 bytes a row: 5 chunks fit under the limit, not 8.
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	limit := syscall.Rlimit{Cur: 16 * 5 * indexdir.ChunkRows, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limit); err != nil {
		t.Skipf("cannot limit the file size: %v", err)
	}
	_, err := Convert(cfg)
	syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old)
	if err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("conversion past the limit: %v, want the OS's error", err)
	}
	t.Log(err)
	for _, name := range []string{FormName, IndexFileName} {
		if _, err := os.Stat(filepath.Join(cfg.Out, name)); err == nil {
			t.Errorf("a failed conversion left %s", name)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(cfg.Out, "*", ".*.tmp*")); len(left) > 0 {
		t.Errorf("temp files left: %v", left)
	}
	rep := convert(t, cfg)
	if rep.ResumedFrom != 4*indexdir.ChunkRows {
		t.Errorf("resumed from row %d, want %d (the last checkpoint that fit)", rep.ResumedFrom, 4*indexdir.ChunkRows)
	}
	a, _ := os.ReadFile(filepath.Join(whole.Out, IndexFileName))
	b, _ := os.ReadFile(filepath.Join(cfg.Out, IndexFileName))
	if !bytes.Equal(a, b) || want.IndexBytes != int64(len(b)) {
		t.Error("the resumed conversion's index differs from the uninterrupted one's")
	}
	if _, err := os.Stat(filepath.Join(cfg.Out, partialDirName)); err == nil {
		t.Error("the checkpoint folder is still there")
	}
}

func FuzzReadForm(f *testing.F) {
	f.Add([]byte(`{"factory":"IVF4,PQ4np","index_file":"index.faiss","dimension":16,"count":3,"metric":"ip","rerank":10,"source":{"path":"/x/flat.index","offset":45}}`))
	f.Add([]byte(`{"factory":"SQ8","index_file":"../index.faiss","dimension":16,"count":3,"metric":"ip"}`))
	f.Add([]byte(`{"dimension":16,"count":3,"metric":"l2","index_file":"i","rerank":5,"source":{"path":"relative"}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, FormName), data, 0o644)
		form, err := ReadForm(dir)
		if err == nil && (form.Dimension <= 0 || filepath.Base(form.IndexFile) != form.IndexFile || form.IndexFile == ".." ||
			form.Rescore < 0 || (form.Rescore > 0 && !filepath.IsAbs(form.Source.Path))) {
			t.Fatalf("accepted an invalid form %+v", form)
		}
	})
}

// SearchContext answers as Search in units of rescoreBatch queries (with and without
// re-scoring): it checks ctx before each unit, and a search whose context carries a gate (the
// server's bulk work) waits at it before each unit while a single query's search runs on the
// same index, holding nothing that search needs.
func TestSearchContextPausesBetweenUnits(t *testing.T) {
	const n, dim, k = 2000, 32, 10
	const nq = rescoreBatch + 5 // two units
	db, q := testvec.SmallInts(n, dim, 1), testvec.SmallInts(nq, dim, 2)
	dir := t.TempDir()
	src := writeFlat(t, dir, faissgo.IP, dim, n, fixed(db, dim))
	out := filepath.Join(dir, "form")
	convert(t, Config{From: src, Out: out, Factory: "IVF16,PQ8x4np", TrainSize: n, Rescore: 50, Nprobe: 4})
	for _, opt := range []Options{{Threads: 2}, {Threads: 2, Rescore: -1}} {
		x := open(t, out, opt)
		wantD, wantL := search(t, x, q, dim, k)
		single := q[:dim]
		_, singleL := search(t, x, single, dim, k)
		d, l := make([]float32, nq*k), make([]int64, nq*k)
		if err := x.SearchContext(testctx.LiveFor(2), q, k, d, l); err != nil || !slices.Equal(l, wantL) || !slices.Equal(d, wantD) {
			t.Fatalf("rescore %d: SearchContext with a live context: %v, or other answers", opt.Rescore, err)
		}
		if err := x.SearchContext(testctx.LiveFor(1), q, k, d, l); !errors.Is(err, context.Canceled) {
			t.Fatalf("rescore %d: a context that ended after the first unit: %v, want context.Canceled", opt.Rescore, err)
		}

		var g gate.Gate
		u, err := g.Begin(context.Background(), true) // as the server's batcher begins a bulk search
		if err != nil {
			t.Fatal(err)
		}
		g.Enter() // a single query is waiting
		clear(l)
		done := make(chan error)
		go func() { done <- x.SearchContext(gate.With(context.Background(), u), q, k, d, l) }()
		for g.Pauses() == 0 { // the bulk search waits at its first unit
			runtime.Gosched()
		}
		if _, got := search(t, x, single, dim, k); !slices.Equal(got, singleL) {
			t.Fatalf("rescore %d: the single query's search while the bulk one waits: %v, want %v", opt.Rescore, got, singleL)
		}
		g.Leave()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		u.End()
		if !slices.Equal(l, wantL) || !slices.Equal(d, wantD) {
			t.Fatalf("rescore %d: the bulk search after it waited gave other answers", opt.Rescore)
		}
	}
}
