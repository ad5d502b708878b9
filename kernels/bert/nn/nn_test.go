package nn

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"needle/internal/half"
	"needle/platform/cpu"
)

// Row lengths that cover empty, single, below/at/above one AVX2 and AVX-512 vector, and model widths.
var widths = []int{0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 384, 1001}

func randVec(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * scale)
	}
	return x
}

// withSpecials plants NaN, +inf and -inf in copies of x (when long enough).
func withSpecials(x []float32) [][]float32 {
	out := [][]float32{x}
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		if len(x) > 2 {
			y := append([]float32{}, x...)
			y[len(y)/2] = v
			out = append(out, y)
		}
	}
	return out
}

// close32 reports whether got matches the reference want: both NaN, equal (inf), or within
// abs + rel*|want|.
func close32(got, want float32, abs, rel float64) bool {
	g, w := float64(got), float64(want)
	if math.IsNaN(w) || math.IsNaN(g) {
		return math.IsNaN(w) && math.IsNaN(g)
	}
	if math.IsInf(w, 0) || math.IsInf(g, 0) {
		return g == w
	}
	return math.Abs(g-w) <= abs+rel*math.Abs(w)
}

func compare(t *testing.T, what string, level cpu.Level, got, want []float32, abs, rel float64) {
	t.Helper()
	for i := range want {
		if !close32(got[i], want[i], abs, rel) {
			t.Fatalf("%s at %s: [%d] = %g, reference %g", what, level, i, got[i], want[i])
		}
	}
}

// simdLevels are the levels compared with Ref on this CPU.
func simdLevels() []cpu.Level { return cpu.Levels()[1:] }

func TestRowOpsMatchReference(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	ref := New(cpu.Ref)
	for _, n := range widths {
		rows := 3
		for _, x := range withSpecials(randVec(r, rows*n, 3)) {
			bias, res := randVec(r, n, 1), randVec(r, rows*n, 1)
			gamma, beta := randVec(r, n, 1), randVec(r, n, 1)
			for _, level := range simdLevels() {
				o := New(level)
				want, got := make([]float32, rows*n), make([]float32, rows*n)
				ref.AddLayerNorm(want, x, bias, res, gamma, beta, rows, n, 1e-12)
				o.AddLayerNorm(got, x, bias, res, gamma, beta, rows, n, 1e-12)
				compare(t, "AddLayerNorm", level, got, want, 1e-4, 1e-4)

				for _, act := range []Act{NoAct, GELU} {
					want, got = append([]float32{}, x...), append([]float32{}, x...)
					ref.BiasAct(want, bias, rows, n, act)
					o.BiasAct(got, bias, rows, n, act)
					compare(t, "BiasAct", level, got, want, 1e-6, 1e-6)
				}
				for _, valid := range []int{n, n / 2} {
					want, got = append([]float32{}, x...), append([]float32{}, x...)
					ref.Softmax(want, rows, n, valid, 0.125)
					o.Softmax(got, rows, n, valid, 0.125)
					compare(t, "Softmax", level, got, want, 1e-7, 1e-5)
				}
				want, got = append([]float32{}, x...), append([]float32{}, x...)
				ref.L2Normalize(want, rows, n)
				o.L2Normalize(got, rows, n)
				compare(t, "L2Normalize", level, got, want, 1e-7, 1e-5)
			}
		}
	}
}

// TestReferenceSemantics pins the scalar reference to the math it stands for, in float64.
func TestReferenceSemantics(t *testing.T) {
	ref := New(cpu.Ref)
	x := []float32{-3, -0.5, 0, 0.5, 3}
	g := append([]float32{}, x...)
	ref.BiasAct(g, nil, 1, len(x), GELU)
	for i, v := range x {
		want := 0.5 * float64(v) * (1 + math.Erf(float64(v)/math.Sqrt2))
		if math.Abs(float64(g[i])-want) > 1e-6 {
			t.Errorf("gelu(%g) = %g, want %g", v, g[i], want)
		}
	}
	s := []float32{1, 2, 3, 99}
	ref.Softmax(s, 1, 4, 3, 1)
	den := math.Exp(1) + math.Exp(2) + math.Exp(3)
	for i := 0; i < 3; i++ {
		if math.Abs(float64(s[i])-math.Exp(float64(i+1))/den) > 1e-6 {
			t.Errorf("softmax[%d] = %g", i, s[i])
		}
	}
	if s[3] != 0 {
		t.Errorf("masked softmax entry = %g, want 0", s[3])
	}
	ln := make([]float32, 4)
	ones, zeros := []float32{1, 1, 1, 1}, make([]float32, 4)
	ref.AddLayerNorm(ln, []float32{1, 2, 3, 4}, nil, nil, ones, zeros, 1, 4, 0)
	for i, want := range []float64{-1.3416408, -0.4472136, 0.4472136, 1.3416408} {
		if math.Abs(float64(ln[i])-want) > 1e-6 {
			t.Errorf("layernorm[%d] = %g, want %g", i, ln[i], want)
		}
	}
}

// naiveLinear is the float64 oracle of Linear; w holds the fp16 weights' exact values.
func naiveLinear(x, w, b []float32, rows, in, out int, act Act) []float32 {
	y := make([]float32, rows*out)
	for r := 0; r < rows; r++ {
		for o := 0; o < out; o++ {
			s := float64(b[o])
			for k := 0; k < in; k++ {
				s += float64(x[r*in+k]) * float64(w[o*in+k])
			}
			if act == GELU {
				s = 0.5 * s * (1 + math.Erf(s/math.Sqrt2))
			}
			y[r*out+o] = float32(s)
		}
	}
	return y
}

// halves packs w[out,in] as fp16 with the reference level: the panels for Linear and the
// values they hold, in w's order.
func halves(t testing.TB, w []float32, out, in int) ([]uint16, []float32) {
	t.Helper()
	h := make([]uint16, PackedLen(out, in))
	if err := New(cpu.Ref).PackHalf(h, w, out, in); err != nil {
		t.Fatal(err)
	}
	v := make([]float32, len(w))
	for o := 0; o < out; o++ {
		for i := 0; i < in; i++ {
			v[o*in+i] = half.ToFloat32(h[(o/16*in+i)*16+o%16])
		}
	}
	return h, v
}

func TestLinear(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	// Rows on both sides of the few-rows path (<= 128) and of its row blocks (12 or 6);
	// outputs that fill panels, leave one partial, or leave an AVX2 vector all padding.
	for _, shape := range [][3]int{{1, 1, 1}, {5, 17, 9}, {13, 200, 130}, {7, 5, 20}, {25, 64, 48},
		{32, 64, 80}, {33, 64, 48}, {40, 33, 300}, {128, 20, 40}, {129, 20, 40}, {0, 8, 8}} {
		rows, in, out := shape[0], shape[1], shape[2]
		x, b := randVec(r, rows*in, 1), randVec(r, out, 1)
		w, wv := halves(t, randVec(r, out*in, 0.2), out, in)
		for _, level := range cpu.Levels() {
			for _, act := range []Act{NoAct, GELU} {
				y := make([]float32, rows*out)
				if err := New(level).Linear(y, x, w, b, rows, in, out, act); err != nil {
					t.Fatal(err)
				}
				compare(t, "Linear", level, y, naiveLinear(x, wv, b, rows, in, out, act), 1e-4, 1e-4)
			}
		}
	}
	if err := New(cpu.Ref).Linear(make([]float32, 3), make([]float32, 4), make([]uint16, 4), nil, 2, 2, 2, NoAct); err == nil {
		t.Error("Linear accepted a short output buffer")
	}
}

// TestLinearConcurrent runs few-row Linears from many goroutines at 2 threads: one caller
// at a time gets the team (team.c), the others run alone; all must match the serial result.
func TestLinearConcurrent(t *testing.T) {
	r := rand.New(rand.NewSource(8))
	const rows, in, out = 12, 96, 200
	x, b := randVec(r, rows*in, 1), randVec(r, out, 1)
	w, _ := halves(t, randVec(r, out*in, 0.2), out, in)
	ops, err := Selected()
	if err != nil {
		t.Fatal(err)
	}
	SetThreads(2)
	defer SetThreads(1)
	want := make([]float32, rows*out)
	if err := ops.Linear(want, x, w, b, rows, in, out, GELU); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			y := make([]float32, rows*out)
			for range 200 {
				if err := ops.Linear(y, x, w, b, rows, in, out, GELU); err != nil {
					errs <- err
					return
				}
				if !slices.Equal(y, want) {
					errs <- fmt.Errorf("a concurrent Linear differs from the serial one")
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestLinearStopUnsetIsExact: a Linear given a Stop that is never set (the serving encoder's
// case) gives the same bits as one without, at 1 and 2 threads, with row counts around the
// task and conversion sizes.
func TestLinearStopUnsetIsExact(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	ops, err := Selected()
	if err != nil {
		t.Fatal(err)
	}
	defer SetThreads(1)
	for _, shape := range [][3]int{{12, 384, 1536}, {129, 33, 47}, {255, 384, 1152}, {256, 1536, 384},
		{257, 384, 384}, {1001, 384, 1536}} {
		rows, in, out := shape[0], shape[1], shape[2]
		x, b := randVec(r, rows*in, 1), randVec(r, out, 1)
		w, _ := halves(t, randVec(r, out*in, 0.2), out, in)
		for _, threads := range []int{1, 2} {
			SetThreads(threads)
			want, got := make([]float32, rows*out), make([]float32, rows*out)
			if err := ops.Linear(want, x, w, b, rows, in, out, GELU); err != nil {
				t.Fatal(err)
			}
			if err := ops.WithStop(new(Stop)).Linear(got, x, w, b, rows, in, out, GELU); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%v at %d threads: with an unset Stop [%d] = %g, without %g", shape, threads, i, got[i], want[i])
				}
			}
		}
	}
}

// TestLinearBatchInvariant: every row of a batch gets the bits it gets alone, at every level
// and thread count, in one task and across several, for Linear, LinearInt8 and LinearBF16
// (where the level has it).
func TestLinearBatchInvariant(t *testing.T) {
	r := rand.New(rand.NewSource(21))
	defer SetThreads(1)
	const in, out = 200, 100 // neither a multiple of the panels nor of the int8 groups
	wf, b := randVec(r, out*in, 0.1), randVec(r, out, 0.1)
	w, _ := halves(t, wf, out, in)
	wq, err := PackInt8(wf, out, in)
	if err != nil {
		t.Fatal(err)
	}
	wb, err := PackBF16(wf, out, in)
	if err != nil {
		t.Fatal(err)
	}
	for _, level := range cpu.Levels() {
		ops := New(level)
		linears := map[string]func(y, x []float32, rows int) error{
			"fp16": func(y, x []float32, rows int) error { return ops.Linear(y, x, w, b, rows, in, out, GELU) },
			"int8": func(y, x []float32, rows int) error { return ops.LinearInt8(y, x, wq, b, rows, GELU) },
		}
		if ops.HasBF16() {
			linears["bf16"] = func(y, x []float32, rows int) error { return ops.LinearBF16(y, x, wb, b, rows, GELU) }
		}
		for name, linear := range linears {
			for _, threads := range []int{1, 2} {
				SetThreads(threads)
				for _, rows := range []int{2, 13, 47, LinearTaskRows + 5, 700} {
					x := randVec(r, rows*in, 1)
					batch := make([]float32, rows*out)
					if err := linear(batch, x, rows); err != nil {
						t.Fatal(err)
					}
					for _, row := range []int{0, rows / 2, rows - 1} {
						alone := make([]float32, out)
						if err := linear(alone, x[row*in:(row+1)*in], 1); err != nil {
							t.Fatal(err)
						}
						for o, v := range alone {
							if got := batch[row*out+o]; math.Float32bits(got) != math.Float32bits(v) {
								t.Fatalf("%v %s, %d threads: row %d of %d, output %d: %g in the batch, %g alone",
									level, name, threads, row, rows, o, got, v)
							}
						}
					}
				}
			}
		}
	}
}

// TestLinearStops: a set Stop makes Linear return ErrStopped. Set before the call, nothing is
// written; set during it (from another goroutine, at a moment the test cannot choose: any
// number of units may be done, all of them included), the work done is whole team tasks
// (up to LinearTaskRows rows by 64 outputs) in task order: a finished prefix, exact, and the
// rest untouched.
func TestLinearStops(t *testing.T) {
	r := rand.New(rand.NewSource(10))
	ops, err := Selected()
	if err != nil {
		t.Fatal(err)
	}
	SetThreads(2)
	defer SetThreads(1)
	nan := float32(math.NaN())
	for _, c := range []struct {
		name          string
		rows, in, out int
	}{
		{"query", 64, 256, 16384},
		{"batch", 4096, 384, 1536},
	} {
		groups := (c.out + 63) / 64
		unit := func(row, col int) int { return row/LinearTaskRows*groups + col/64 } // the task that writes y[row, col]
		x := randVec(r, c.rows*c.in, 1)
		w, _ := halves(t, randVec(r, c.out*c.in, 0.2), c.out, c.in)
		want := make([]float32, c.rows*c.out)
		if err := ops.Linear(want, x, w, nil, c.rows, c.in, c.out, NoAct); err != nil {
			t.Fatal(err)
		}
		y := make([]float32, c.rows*c.out)
		for i := range y {
			y[i] = nan
		}
		stop := new(Stop)
		stop.Set()
		if err := ops.WithStop(stop).Linear(y, x, w, nil, c.rows, c.in, c.out, NoAct); err != ErrStopped {
			t.Fatalf("%s: Linear with a set Stop returned %v, want ErrStopped", c.name, err)
		}
		if i := slices.IndexFunc(y, func(v float32) bool { return !math.IsNaN(float64(v)) }); i >= 0 {
			t.Fatalf("%s: Linear with a set Stop wrote y[%d]", c.name, i)
		}

		stop = new(Stop)
		time.AfterFunc(time.Millisecond, stop.Set)
		err := ops.WithStop(stop).Linear(y, x, w, nil, c.rows, c.in, c.out, NoAct)
		if err != nil && err != ErrStopped {
			t.Fatal(err)
		}
		done := map[int]bool{} // unit -> finished (exact) or untouched
		for i := range y {
			u, exact := unit(i/c.out, i%c.out), math.Float32bits(y[i]) == math.Float32bits(want[i])
			if !exact && !math.IsNaN(float64(y[i])) {
				t.Fatalf("%s: stopped Linear wrote y[%d] = %g, want %g or nothing", c.name, i, y[i], want[i])
			}
			if was, seen := done[u]; seen && was != exact {
				t.Fatalf("%s: unit %d of the stopped Linear is partly written", c.name, u)
			}
			done[u] = exact
		}
		finished := 0
		for finished < len(done) && done[finished] {
			finished++
		}
		for u := finished; u < len(done); u++ {
			if done[u] {
				t.Fatalf("%s: unit %d finished after unit %d was skipped", c.name, u, finished)
			}
		}
		if err == nil && finished != len(done) {
			t.Fatalf("%s: Linear returned nil with %d of %d units done", c.name, finished, len(done))
		}
		t.Logf("%s: stopped from another goroutine after %d of %d units (%v)", c.name, finished, len(done), err)
	}
}

// TestLinearDecodesEveryHalf multiplies every finite fp16 weight by 1 on both paths (few
// rows and sgemm): each must come out as its exact value.
func TestLinearDecodesEveryHalf(t *testing.T) {
	var values []float32
	for h := 0; h < 1<<16; h++ {
		if h&0x7c00 != 0x7c00 {
			values = append(values, half.ToFloat32(uint16(h)))
		}
	}
	w, _ := halves(t, values, len(values), 1) // one input: the panels hold w in order
	for _, rows := range []int{1, 129} {
		x := make([]float32, rows)
		x[0] = 1
		for _, level := range cpu.Levels() {
			y := make([]float32, rows*len(values))
			if err := New(level).Linear(y, x, w, nil, rows, 1, len(values), NoAct); err != nil {
				t.Fatal(err)
			}
			for o, want := range values {
				if y[o] != want { // -0 sums to +0: a dot product starts at +0
					t.Fatalf("%s, %d rows: half %#04x decoded as %g, want %g", level, rows, w[o], y[o], want)
				}
			}
		}
	}
}

// TestPackHalf: PackHalf rounds as half.FromFloat32 (whose own test bisects the halves).
func TestPackHalf(t *testing.T) {
	var in []float32
	for h := 0; h < 0x7c00; h++ { // every finite half, both signs, and the midpoints around it
		v := half.ToFloat32(uint16(h))
		next := half.ToFloat32(uint16(h + 1))
		mid := float32((float64(v) + float64(next)) / 2)
		in = append(in, v, -v, mid, -mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1e9))
	}
	r := rand.New(rand.NewSource(7))
	for range 100000 {
		in = append(in, float32(r.NormFloat64()*math.Pow(2, float64(r.Intn(40)-30))))
	}
	in = slices.DeleteFunc(in, func(f float32) bool { return math.Abs(float64(f)) >= 65520 })
	for _, level := range cpu.Levels() {
		got := make([]uint16, PackedLen(len(in), 1)) // one input: the panels hold in in order
		if err := New(level).PackHalf(got, in, len(in), 1); err != nil {
			t.Fatalf("%s: %v", level, err)
		}
		for i, f := range in {
			if want := half.FromFloat32(f); got[i] != want {
				t.Fatalf("%s: %g (%#08x) -> %#04x, want %#04x", level, f, math.Float32bits(f), got[i], want)
			}
		}
		for _, bad := range []float32{65520, -70000, float32(math.Inf(1)), float32(math.NaN())} {
			w := make([]float32, 5*7) // [5,7]: the error names the index in w, not in the panels
			w[3*7+2] = bad
			if err := New(level).PackHalf(make([]uint16, PackedLen(5, 7)), w, 5, 7); err == nil || !strings.Contains(err.Error(), "index 23") {
				t.Errorf("%s: PackHalf with %g = %v, want an error at index 23", level, bad, err)
			}
		}
	}
}

// naiveAttention is the float64 oracle of Attention for one packed batch.
func naiveAttention(qkv []float32, start []int32, heads, d int) []float32 {
	hidden := heads * d
	ctx := make([]float32, int(start[len(start)-1])*hidden)
	for s := 0; s+1 < len(start); s++ {
		a, b := int(start[s]), int(start[s+1])
		for h := 0; h < heads; h++ {
			for i := a; i < b; i++ {
				scores := make([]float64, b-a)
				m := math.Inf(-1)
				for j := a; j < b; j++ {
					dot := 0.0
					for k := 0; k < d; k++ {
						dot += float64(qkv[i*3*hidden+h*d+k]) * float64(qkv[j*3*hidden+hidden+h*d+k])
					}
					scores[j-a] = dot / math.Sqrt(float64(d))
					m = math.Max(m, scores[j-a])
				}
				sum := 0.0
				for j := range scores {
					scores[j] = math.Exp(scores[j] - m)
					sum += scores[j]
				}
				for k := 0; k < d; k++ {
					acc := 0.0
					for j := a; j < b; j++ {
						acc += scores[j-a] / sum * float64(qkv[j*3*hidden+2*hidden+h*d+k])
					}
					ctx[i*hidden+h*d+k] = float32(acc)
				}
			}
		}
	}
	return ctx
}

// TestAttention covers head widths below, at and past a vector (4, 8, 32, 64, 72) and
// sequences of 0, 1, 7, 17 tokens and past several vectors of keys (70, 300: longer than a
// score block of 64 keys and than the 256-token limit).
func TestAttention(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, c := range []struct {
		heads, d int
		start    []int32
	}{
		{3, 8, []int32{0, 1, 1, 8, 25}}, {2, 4, []int32{0, 3, 20}}, {12, 32, []int32{0, 12, 82}},
		{2, 64, []int32{0, 300, 317}}, {1, 72, []int32{0, 5, 75}},
	} {
		T := int(c.start[len(c.start)-1])
		qkv := randVec(r, T*3*c.heads*c.d, 1)
		want := naiveAttention(qkv, c.start, c.heads, c.d)
		for _, threads := range []int{1, 2} {
			SetThreads(threads)
			for _, level := range cpu.Levels() {
				ctx := make([]float32, T*c.heads*c.d)
				if err := New(level).Attention(ctx, qkv, c.start, c.heads, c.d, make([]float32, AttentionScratch(c.start, c.d))); err != nil {
					t.Fatal(err)
				}
				compare(t, fmt.Sprintf("Attention %d heads of %d, starts %v", c.heads, c.d, c.start), level, ctx, want, 1e-5, 1e-4)
			}
		}
	}
	SetThreads(1)
	heads, d := 3, 8
	qkv := randVec(r, 25*3*heads*d, 1)
	for _, bad := range [][]int32{{1, 25}, {0, 24}, {0, 9, 8, 25}} {
		if err := New(cpu.Ref).Attention(make([]float32, 25*heads*d), qkv, bad, heads, d, make([]float32, 1000)); err == nil {
			t.Errorf("Attention accepted starts %v", bad)
		}
	}
}

func TestEmbedAndPool(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	n := 20
	word, pos, typ := randVec(r, 10*n, 1), randVec(r, 6*n, 1), randVec(r, n, 1)
	gamma, beta := randVec(r, n, 1), randVec(r, n, 1)
	ids, posIDs := []int32{2, 9, 0, 5, 5}, []int32{0, 1, 0, 1, 2}
	start := []int32{0, 2, 5}
	for _, level := range cpu.Levels() {
		o := New(level)
		got := make([]float32, len(ids)*n)
		if err := o.EmbedLayerNorm(got, ids, posIDs, word, pos, typ, gamma, beta, n, 1e-12); err != nil {
			t.Fatal(err)
		}
		for i := range ids {
			want := make([]float32, n)
			New(cpu.Ref).AddLayerNorm(want, word[int(ids[i])*n:], typ, pos[int(posIDs[i])*n:], gamma, beta, 1, n, 1e-12)
			compare(t, "EmbedLayerNorm", level, got[i*n:(i+1)*n], want, 1e-5, 1e-5)
		}
		for _, mode := range []Pooling{MeanPool, CLSPool} {
			dst := make([]float32, 2*n)
			if err := o.Pool(dst, got, start, n, mode, true); err != nil {
				t.Fatal(err)
			}
			for s := 0; s < 2; s++ {
				want := make([]float64, n)
				a, b := int(start[s]), int(start[s+1])
				if mode == CLSPool {
					b = a + 1
				}
				norm := 0.0
				for j := 0; j < n; j++ {
					for tk := a; tk < b; tk++ {
						want[j] += float64(got[tk*n+j]) / float64(b-a)
					}
					norm += want[j] * want[j]
				}
				for j := 0; j < n; j++ {
					if math.Abs(want[j]/math.Sqrt(norm)-float64(dst[s*n+j])) > 1e-5 {
						t.Fatalf("Pool(%d) at %s: seq %d [%d] = %g, want %g", mode, level, s, j, dst[s*n+j], want[j]/math.Sqrt(norm))
					}
				}
			}
		}
	}
	o := New(cpu.Ref)
	if err := o.EmbedLayerNorm(make([]float32, 5*n), []int32{10}, []int32{0}, word, pos, typ, gamma, beta, n, 1e-12); err == nil {
		t.Error("EmbedLayerNorm accepted token id 10 of a 10-word vocabulary")
	}
	if err := o.EmbedLayerNorm(make([]float32, 5*n), []int32{1}, []int32{6}, word, pos, typ, gamma, beta, n, 1e-12); err == nil {
		t.Error("EmbedLayerNorm accepted position 6 of 6")
	}
}

// benchLinear times an FFN GEMM (in -> out, GELU) on rows rows with ops.
func benchLinear(b *testing.B, ops Ops, rows, in, out int) {
	r := rand.New(rand.NewSource(5))
	x, bias := randVec(r, rows*in, 1), randVec(r, out, 0.1)
	w, _ := halves(b, randVec(r, out*in, 0.05), out, in)
	y := make([]float32, rows*out)
	for b.Loop() {
		if err := ops.Linear(y, x, w, bias, rows, in, out, GELU); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(2*float64(rows*in*out*b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkLinearFewRows is one single-query FFN-in GEMM of MiniLM (12 tokens), the few-rows
// path a query takes instead of sgemm.
func BenchmarkLinearFewRows(b *testing.B) {
	ops, err := Selected()
	if err != nil {
		b.Fatal(err)
	}
	benchLinear(b, ops, 12, 384, 1536)
}

// BenchmarkLinearBatch is the FFN GEMMs of a 64-query batch (1,000 tokens): MiniLM's FFN-in
// (384 -> 1536) without and with a Stop, and e5-base's FFN-out (3072 -> 768), whose rows of
// 3,072 inputs do not fit L1.
func BenchmarkLinearBatch(b *testing.B) {
	ops, err := Selected()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("minilm", func(b *testing.B) { benchLinear(b, ops, 1000, 384, 1536) })
	b.Run("minilm-stop", func(b *testing.B) { benchLinear(b, ops.WithStop(new(Stop)), 1000, 384, 1536) })
	b.Run("e5-ffn-out", func(b *testing.B) { benchLinear(b, ops, 1000, 3072, 768) })
}

// BenchmarkAttentionQuery is one layer's attention of a 12-token query (12 heads of 32).
func BenchmarkAttentionQuery(b *testing.B) {
	const tokens, heads, d = 12, 12, 32
	r := rand.New(rand.NewSource(6))
	qkv := randVec(r, tokens*3*heads*d, 1)
	ctx := make([]float32, tokens*heads*d)
	start := []int32{0, tokens}
	scratch := make([]float32, AttentionScratch(start, 32))
	ops, err := Selected()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := ops.Attention(ctx, qkv, start, heads, d, scratch); err != nil {
			b.Fatal(err)
		}
	}
}
