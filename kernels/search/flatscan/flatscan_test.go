package flatscan

import (
	"fmt"
	"math"
	"testing"

	"needle/internal/byteview"
	"needle/platform/cpu"
	"needle/testkit/testvec"
)

// rowBytes lays rows out as a mapped file does: little-endian float32s after skip bytes, so
// the rows are misaligned unless skip is a multiple of 4.
func rowBytes(v []float32, skip int) []byte {
	return append(make([]byte, skip), byteview.Float32s(v)...)[skip:]
}

var smallInts, gaussians = testvec.SmallInts, testvec.Unit

// vectorLevels are the SIMD levels this CPU runs, but the reference.
func vectorLevels() []cpu.Level {
	var ls []cpu.Level
	for _, l := range cpu.Levels() {
		if l != cpu.Ref {
			ls = append(ls, l)
		}
	}
	return ls
}

// run is one whole search of the queries q: Start, fold (which hands the search its rows),
// Finish.
func run(t *testing.T, level cpu.Level, m Metric, dim int, q []float32, k, threads int, fold func(s *Search) error) ([]float32, []int64) {
	t.Helper()
	nq := len(q) / dim
	dist, labels := make([]float32, nq*k), make([]int64, nq*k)
	s := &Search{Level: level, Metric: m, Dim: dim, Threads: threads}
	if err := s.Start(q, k, dist, labels); err != nil {
		t.Fatal(err)
	}
	if err := fold(s); err != nil {
		t.Fatal(err)
	}
	s.Finish()
	return dist, labels
}

// search runs a whole search with stripes of stripe rows.
func search(t *testing.T, level cpu.Level, m Metric, dim int, rows []byte, q []float32, k, stripe, threads int) ([]float32, []int64) {
	t.Helper()
	return run(t, level, m, dim, q, k, threads, func(s *Search) error {
		n := len(rows) / (4 * dim)
		for r := 0; r < n || r == 0; r += stripe {
			end := min(r+stripe, n)
			if err := s.Scan(rows[4*dim*r:4*dim*end], int64(r)); err != nil {
				return err
			}
		}
		return nil
	})
}

// rescore runs a whole search that re-scores r gathered candidate rows per query.
func rescore(t *testing.T, level cpu.Level, m Metric, dim int, rows []float32, cand []int64, r int, q []float32, k, threads int) ([]float32, []int64) {
	t.Helper()
	return run(t, level, m, dim, q, k, threads, func(s *Search) error { return s.Rescore(rows, cand, r) })
}

// With exact scores, every level and the scalar oracle must agree on every id and score, ties
// included, whatever the stripes, threads and alignment.
func TestLevelsMatchRefExactly(t *testing.T) {
	for _, c := range []struct {
		n, dim, nq, k, stripe, threads, skip int
	}{
		{1, 1, 1, 1, Block, 1, 0},
		{5, 7, 3, 10, Block, 2, 1},          // k > n: missing hits
		{1023, 33, 5, 8, Block, 2, 45},      // the offset of a flat index file
		{1025, 16, 1, 50, Block, 2, 2},      // one query, a partial second block
		{5000, 24, 33, 17, 2 * Block, 2, 3}, // stripes of two blocks, a partial last stripe
		{4096, 8, 64, 3, 4096, 3, 0},        // more threads than cores
		{3000, 5, 0, 4, Block, 2, 0},        // no queries
		{0, 5, 2, 4, Block, 2, 0},           // no rows
	} {
		for _, m := range []Metric{IP, L2} {
			db, q := smallInts(c.n, c.dim, 1), smallInts(c.nq, c.dim, 2)
			rows := rowBytes(db, c.skip)
			wd, wl := search(t, cpu.Ref, m, c.dim, rows, q, c.k, c.stripe, 1)
			for _, level := range vectorLevels() {
				gd, gl := search(t, level, m, c.dim, rows, q, c.k, c.stripe, c.threads)
				for i := range wl {
					if gl[i] != wl[i] || gd[i] != wd[i] {
						t.Fatalf("%+v %v %v: result %d: (%d, %g), scalar (%d, %g)", c, m, level, i, gl[i], gd[i], wl[i], wd[i])
					}
				}
			}
		}
	}
}

// FAISS's heap keeps, among rows tying at the k-th score, the ones it met before k better-or-
// equal rows had been seen; later better rows evict the tied row with the smallest id (IP)
// or the largest id (L2) first. Results are best first, ties by id descending (IP) or
// ascending (L2). This oracle restates that rule without a heap.
func faissRule(m Metric, scores []float32, k int) []int64 {
	better := func(a, b float32) bool { return a > b }
	if m == L2 {
		better = func(a, b float32) bool { return a < b }
	}
	sorted := append([]float32(nil), scores...)
	for i := 1; i < len(sorted); i++ { // insertion sort, best first
		for j := i; j > 0 && better(sorted[j], sorted[j-1]); j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	if len(sorted) < k {
		k = len(sorted)
	}
	if k == 0 {
		return nil
	}
	kth := sorted[k-1]
	var out, entered []int64
	seen := 0 // rows with a score at least as good as kth so far
	for j, s := range scores {
		if better(s, kth) {
			out = append(out, int64(j))
		} else if s == kth && seen < k {
			entered = append(entered, int64(j))
		}
		if !better(kth, s) {
			seen++
		}
	}
	ties := k - len(out)
	if m == IP {
		out = append(out, entered[len(entered)-ties:]...) // the smallest ids were evicted
	} else {
		out = append(out, entered[:ties]...)
	}
	for i := 1; i < len(out); i++ { // best first; ties by id descending (IP), ascending (L2)
		for j := i; j > 0; j-- {
			a, b := scores[out[j]], scores[out[j-1]]
			if better(a, b) || a == b && (m == IP) == (out[j] > out[j-1]) {
				out[j], out[j-1] = out[j-1], out[j]
			}
		}
	}
	return out
}

func TestHeapFollowsFAISSTieRule(t *testing.T) {
	const dim, n, nq = 3, 2000, 40
	db, q := smallInts(n, dim, 5), smallInts(nq, dim, 6)
	for _, m := range []Metric{IP, L2} {
		for _, k := range []int{1, 2, 7, 64} {
			_, labels := search(t, cpu.Ref, m, dim, rowBytes(db, 0), q, k, Block, 1)
			for qi := range nq {
				scores := make([]float32, n)
				for j := range n {
					var s float32
					for t := range dim {
						x, y := q[qi*dim+t], db[j*dim+t]
						if m == IP {
							s += x * y
						} else {
							s += (x - y) * (x - y)
						}
					}
					scores[j] = s
				}
				want := faissRule(m, scores, k)
				got := labels[qi*k : qi*k+k]
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%v k=%d query %d: ids %v, the rule says %v", m, k, qi, got, want)
					}
				}
			}
		}
	}
}

// On real-valued vectors the kernels' rounding differs from the oracle's: scores agree to a
// tolerance, ids wherever the scores do not nearly tie.
func TestLevelsMatchRefOnGaussians(t *testing.T) {
	const n, dim, nq, k = 3000, 64, 20, 10
	db, q := gaussians(n, dim, 7), gaussians(nq, dim, 8)
	for _, m := range []Metric{IP, L2} {
		wd, wl := search(t, cpu.Ref, m, dim, rowBytes(db, 1), q, k, Block, 1)
		for _, level := range vectorLevels() {
			gd, gl := search(t, level, m, dim, rowBytes(db, 1), q, k, 2*Block, 2)
			sameWithin(t, fmt.Sprint(m, " ", level), gd, gl, wd, wl, k)
		}
	}
}

// sameWithin requires scores within a tolerance of the oracle's (want) and the same ids
// wherever the oracle's scores do not nearly tie.
func sameWithin(t *testing.T, what string, gd []float32, gl []int64, wd []float32, wl []int64, k int) {
	t.Helper()
	for i := range wl {
		tol := 1e-4 * float32(math.Max(1, math.Abs(float64(wd[i]))))
		if d := gd[i] - wd[i]; d > tol || d < -tol {
			t.Fatalf("%s result %d: score %g, oracle %g", what, i, gd[i], wd[i])
		}
		near := func(j int) bool {
			return j/k == i/k && j >= 0 && j < len(wd) && math.Abs(float64(wd[j]-wd[i])) <= float64(tol)
		}
		if gl[i] != wl[i] && !near(i-1) && !near(i+1) {
			t.Fatalf("%s result %d: id %d, oracle %d", what, i, gl[i], wl[i])
		}
	}
}

// TestScoresBatchInvariant: a query's results are the same bits searched alone, among 12
// others or among 69, whatever the threads and stripes; and re-scoring every row gives the
// scan's bits (the compact index's exact scores equal the mapped index's).
func TestScoresBatchInvariant(t *testing.T) {
	const n, dim, nq, k = 2500, 48, 70, 9
	db, q := gaussians(n, dim, 31), gaussians(nq, dim, 32)
	rows := rowBytes(db, 45)
	for _, m := range []Metric{IP, L2} {
		for _, level := range vectorLevels() {
			bd, bl := search(t, level, m, dim, rows, q, k, 2*Block, 2)
			sd, sl := search(t, level, m, dim, rows, q[20*dim:33*dim], k, Block, 1)
			all := make([]int64, n)
			for i := range all {
				all[i] = int64(i)
			}
			for _, qi := range []int{0, 20, 32, 69} {
				ad, al := search(t, level, m, dim, rows, q[qi*dim:(qi+1)*dim], k, 3*Block, 2)
				rd, rl := rescore(t, level, m, dim, db, all, n, q[qi*dim:(qi+1)*dim], k, 1)
				for i := range k {
					j := qi*k + i
					if bl[j] != al[i] || math.Float32bits(bd[j]) != math.Float32bits(ad[i]) ||
						rl[i] != al[i] || math.Float32bits(rd[i]) != math.Float32bits(ad[i]) {
						t.Fatalf("%v %v query %d result %d: (%d, %g) among 70, (%d, %g) alone, (%d, %g) re-scored",
							m, level, qi, i, bl[j], bd[j], al[i], ad[i], rl[i], rd[i])
					}
					if qi >= 20 && qi < 33 {
						if s := (qi-20)*k + i; sl[s] != al[i] || math.Float32bits(sd[s]) != math.Float32bits(ad[i]) {
							t.Fatalf("%v %v query %d result %d: (%d, %g) among 13, (%d, %g) alone", m, level, qi, i, sl[s], sd[s], al[i], ad[i])
						}
					}
				}
			}
		}
	}
}

// Re-scoring the candidates of a query, sorted by label, gives what a scan of just those
// rows gives (FAISS's scores and tie order), at every level as with the oracle; with every row
// as candidate, what a scan of all rows gives. Labels of -1 are skipped.
func TestRescoreIsAScanOfTheCandidates(t *testing.T) {
	const n, dim, nq = 300, 5, 7
	db, q := smallInts(n, dim, 11), smallInts(nq, dim, 12)
	gather := func(cand []int64) []float32 {
		rows := make([]float32, len(cand)*dim)
		for i, id := range cand {
			if id >= 0 {
				copy(rows[i*dim:], db[int(id)*dim:int(id+1)*dim])
			}
		}
		return rows
	}
	for _, m := range []Metric{IP, L2} {
		for _, k := range []int{1, 4, 40} {
			// All rows: the scan's results exactly.
			all := make([]int64, nq*n)
			for i := range all {
				all[i] = int64(i % n)
			}
			wd, wl := search(t, cpu.Ref, m, dim, rowBytes(db, 0), q, k, Block, 1)
			for _, level := range vectorLevels() {
				gd, gl := rescore(t, level, m, dim, gather(all), all, n, q, k, 2)
				for i := range wl {
					if gl[i] != wl[i] || gd[i] != wd[i] {
						t.Fatalf("%v %v k=%d all rows: result %d: rescore (%d, %g), scan (%d, %g)", m, level, k, i, gl[i], gd[i], wl[i], wd[i])
					}
				}
			}
			// 30 candidates per query, every third id, the last two missing.
			const r = 30
			cand := make([]int64, nq*r)
			for qi := range nq {
				for j := range r {
					cand[qi*r+j] = int64((qi + 3*j) % n)
					if j >= r-2 {
						cand[qi*r+j] = -1
					}
				}
			}
			rows := gather(cand)
			sd, sl := rescore(t, cpu.Ref, m, dim, rows, cand, r, q, k, 1)
			for _, level := range vectorLevels() {
				bd, bl := rescore(t, level, m, dim, rows, cand, r, q, k, 3)
				for qi := range nq {
					sub := rows[qi*r*dim : (qi*r+r-2)*dim]
					md, ml := search(t, cpu.Ref, m, dim, rowBytes(sub, 0), q[qi*dim:(qi+1)*dim], k, Block, 1)
					for i := range k {
						want := int64(-1)
						if ml[i] >= 0 {
							want = cand[qi*r+int(ml[i])]
						}
						j := qi*k + i
						if sl[j] != want || sd[j] != md[i] || bl[j] != want || bd[j] != md[i] {
							t.Fatalf("%v %v k=%d query %d result %d: scalar (%d, %g), %v (%d, %g), scan of the candidates (%d, %g)",
								m, level, k, qi, i, sl[j], sd[j], level, bl[j], bd[j], want, md[i])
						}
					}
				}
			}
		}
	}
}

func TestBadCalls(t *testing.T) {
	s := &Search{Metric: IP, Dim: 4}
	d, l := make([]float32, 2), make([]int64, 2)
	for _, c := range []struct {
		name string
		err  error
	}{
		{"ragged queries", s.Start(make([]float32, 6), 1, d, l)},
		{"short results", s.Start(make([]float32, 8), 2, d, l)},
		{"zero k", s.Start(make([]float32, 8), 0, d[:0], l[:0])},
		{"bad metric", (&Search{Metric: 5, Dim: 4}).Start(make([]float32, 8), 1, d, l)},
	} {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	if err := s.Start(make([]float32, 8), 1, d, l); err != nil {
		t.Fatal(err)
	}
	if err := s.Scan(make([]byte, 15), 0); err == nil {
		t.Error("partial row: no error")
	}
	if err := s.Scan(make([]byte, 16), Block); err == nil {
		t.Error("gap before the stripe: no error")
	}
	if err := s.Scan(make([]byte, 16), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Scan(make([]byte, 16), 1); err == nil {
		t.Error("stripe not on a block boundary: no error")
	}
	if err := s.Rescore(make([]float32, 12), make([]int64, 3), 1); err == nil {
		t.Error("rescore: more candidates than queries x r: no error")
	}
	if err := s.Rescore(make([]float32, 4), make([]int64, 2), 2); err == nil {
		t.Error("rescore: too few rows for the candidates: no error")
	}
}

func TestStripeRows(t *testing.T) {
	for _, nq := range []int{0, 1, 64, 1000, 1 << 20} {
		for _, dim := range []int{0, 1, 384, 768, 1 << 20} {
			r := StripeRows(nq, dim)
			over := r*max(nq, 1)*4 > 16<<20 || r*max(nq, 1)*max(dim, 1) > 1<<27
			if r%Block != 0 || r < Block || r > 64*Block || (over && r > Block) {
				t.Errorf("StripeRows(%d, %d) = %d", nq, dim, r)
			}
		}
	}
	if r := StripeRows(64, 384); r != 5*Block {
		t.Errorf("StripeRows(64, 384) = %d, want %d (2^27 multiply-adds)", r, 5*Block)
	}
}

// BenchmarkScan: one search of nq queries over 20,000 rows of 384 floats (the WordNet demo's
// MiniLM index) at the selected level on 2 threads, in stripes as the mapped index scans.
// GFLOP/s counts the dot products' multiply-adds (2 each).
func BenchmarkScan(b *testing.B) {
	const n, dim, k = 20000, 384, 10
	level, err := cpu.Selected()
	if err != nil {
		b.Fatal(err)
	}
	rows := rowBytes(gaussians(n, dim, 51), 45)
	for _, nq := range []int{1, 64, 2560} {
		q := gaussians(nq, dim, 52)
		b.Run(fmt.Sprintf("queries=%d", nq), func(b *testing.B) {
			dist, labels := make([]float32, nq*k), make([]int64, nq*k)
			s := &Search{Level: level, Metric: IP, Dim: dim, Threads: 2}
			stripe := StripeRows(nq, dim)
			for b.Loop() {
				if err := s.Start(q, k, dist, labels); err != nil {
					b.Fatal(err)
				}
				for r := 0; r < n; r += stripe {
					if err := s.Scan(rows[4*dim*r:4*dim*min(r+stripe, n)], int64(r)); err != nil {
						b.Fatal(err)
					}
				}
				s.Finish()
			}
			b.ReportMetric(2*float64(nq)*n*dim*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
