package nn

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"needle/platform/cpu"
)

// int8Shapes are {rows, in, out}: one row, rows around the row blocks (2, 4, 6, 8) and the task
// chunk (96); in odd, below one pair group, one int8 group (32) and not a multiple of it; out
// filling panels, leaving one partial, or leaving an AVX2 vector all padding.
var int8Shapes = [][3]int{{1, 1, 1}, {1, 384, 1536}, {3, 5, 9}, {5, 17, 40}, {9, 33, 16}, {13, 200, 130},
	{4, 63, 24}, {8, 65, 17}, {12, 3, 33}, {129, 20, 40}, {300, 97, 70}, {0, 8, 8}}

// extremes are an x and w whose quantized values sit at the range ends (activations ±32767,
// weights ±127) with every product of one sign per output: the largest group sums.
func extremes(rows, in, out int) (x, w []float32) {
	x, w = make([]float32, rows*in), make([]float32, out*in)
	sign := func(i int) float32 { return float32(1 - 2*(i%3%2)) }
	for i := range x {
		x[i] = sign(i % in)
	}
	for i := range w {
		w[i] = sign(i%in) * sign(i/in)
	}
	return x, w
}

// amax is NN_Q8_AMAX: the largest |activation|.
const amax = 32767

func TestLinearInt8MatchesReference(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for n, shape := range append(int8Shapes, [3]int{7, 1536, 40}) {
		rows, in, out := shape[0], shape[1], shape[2]
		x, wf := randVec(r, rows*in, 1), randVec(r, out*in, 0.05)
		if n == len(int8Shapes) {
			x, wf = extremes(rows, in, out)
		}
		b := randVec(r, out, 1)
		w, err := PackInt8(wf, out, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, bias := range [][]float32{nil, b} {
			for _, act := range []Act{NoAct, GELU} {
				want := make([]float32, rows*out)
				if err := New(cpu.Ref).LinearInt8(want, x, w, bias, rows, act); err != nil {
					t.Fatal(err)
				}
				for _, level := range simdLevels() {
					got := make([]float32, rows*out)
					if err := New(level).LinearInt8(got, x, w, bias, rows, act); err != nil {
						t.Fatal(err)
					}
					abs := 0.0 // the int32 sums and the dequantizing fma are exact
					if act == GELU {
						abs = 1e-6 // the vector erf is a polynomial
					}
					compare(t, "LinearInt8", level, got, want, abs, abs)
				}
			}
		}
	}
}

// TestLinearInt8Bound checks the reference against float64 math: each output is within the
// error quantization allows, s_x/2 * sum|w| + sum over groups g of s_g/2 * sum_g(|x| + s_x/2),
// where s_x is the row's step (max|x| / amax) and s_g the output's in group g (max_g|w| / 127).
func TestLinearInt8Bound(t *testing.T) {
	r := rand.New(rand.NewSource(12))
	for _, shape := range int8Shapes {
		rows, in, out := shape[0], shape[1], shape[2]
		x, wf, b := randVec(r, rows*in, 1), randVec(r, out*in, 0.05), randVec(r, out, 1)
		w, err := PackInt8(wf, out, in)
		if err != nil {
			t.Fatal(err)
		}
		y := make([]float32, rows*out)
		if err := New(cpu.Ref).LinearInt8(y, x, w, b, rows, NoAct); err != nil {
			t.Fatal(err)
		}
		exact := naiveLinear(x, wf, b, rows, in, out, NoAct)
		worst := 0.0
		for row := 0; row < rows; row++ {
			xr := x[row*in : (row+1)*in]
			sx := 0.0
			for _, v := range xr {
				sx = math.Max(sx, math.Abs(float64(v))/amax)
			}
			for o := 0; o < out; o++ {
				wo := wf[o*in : (o+1)*in]
				bound := 0.0
				for g := 0; g < in; g += 32 {
					maxw, sumw, sumx := 0.0, 0.0, 0.0
					for i := g; i < min(g+32, in); i++ {
						maxw = math.Max(maxw, math.Abs(float64(wo[i])))
						sumw += math.Abs(float64(wo[i]))
						sumx += math.Abs(float64(xr[i])) + sx/2
					}
					bound += sx/2*sumw + maxw/127/2*sumx
				}
				e := math.Abs(float64(y[row*out+o]) - float64(exact[row*out+o]))
				if e > bound*1.001+1e-6 {
					t.Fatalf("shape %v row %d out %d: error %g past the quantization bound %g", shape, row, o, e, bound)
				}
				if bound > 0 {
					worst = math.Max(worst, e/bound)
				}
			}
		}
		t.Logf("shape %v: worst error %.3f of the bound", shape, worst)
	}
}

func TestLinearInt8BadInput(t *testing.T) {
	w := []float32{1, 2, 3, float32(math.Inf(1)), 5, 6}
	var bad *NonFiniteError
	if _, err := PackInt8(w, 2, 3); !errors.As(err, &bad) || bad.Index != 3 {
		t.Errorf("PackInt8 of an inf weight: %v", err)
	}
	if _, err := PackInt8(w, 3, 3); err == nil {
		t.Error("PackInt8 accepted a short matrix")
	}
	w[3] = 4
	m, err := PackInt8(w, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	ops := New(cpu.Ref)
	if err := ops.LinearInt8(make([]float32, 3), make([]float32, 6), m, nil, 2, NoAct); err == nil {
		t.Error("LinearInt8 accepted a short output buffer")
	}
	if err := ops.LinearInt8(make([]float32, 4), make([]float32, 6), m, make([]float32, 1), 2, NoAct); err == nil {
		t.Error("LinearInt8 accepted a short bias")
	}
	if err := ops.LinearInt8(make([]float32, 4), make([]float32, 6), nil, nil, 2, NoAct); err == nil {
		t.Error("LinearInt8 accepted nil weights")
	}
}

// BenchmarkLinearInt8 compares LinearInt8 and LinearBF16 (where the level has it) with Linear
// (fp16 weights) on MiniLM's FFN-in shape (384 -> 1536) for a query's 12 rows and a batch's
// 2,048 rows, and 288 rows (a batch of 32 nine-token queries, what 64 clients give a 2-core
// server); sub-benchmarks fp16, int8 and bf16.
func BenchmarkLinearInt8(b *testing.B) {
	const in, out = 384, 1536
	r := rand.New(rand.NewSource(13))
	wf, bias := randVec(r, out*in, 0.05), randVec(r, out, 0.1)
	wh, _ := halves(b, wf, out, in)
	wq, err := PackInt8(wf, out, in)
	if err != nil {
		b.Fatal(err)
	}
	wb, err := PackBF16(wf, out, in)
	if err != nil {
		b.Fatal(err)
	}
	ops, err := Selected()
	if err != nil {
		b.Fatal(err)
	}
	for _, rows := range []int{12, 288, 2048} {
		x, y := randVec(r, rows*in, 1), make([]float32, rows*out)
		run := func(b *testing.B, linear func() error) {
			for b.Loop() {
				if err := linear(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(2*float64(rows*in*out)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GOP/s")
		}
		b.Run(fmt.Sprintf("rows=%d/fp16", rows), func(b *testing.B) {
			run(b, func() error { return ops.Linear(y, x, wh, bias, rows, in, out, GELU) })
		})
		b.Run(fmt.Sprintf("rows=%d/int8", rows), func(b *testing.B) {
			run(b, func() error { return ops.LinearInt8(y, x, wq, bias, rows, GELU) })
		})
		if ops.HasBF16() {
			b.Run(fmt.Sprintf("rows=%d/bf16", rows), func(b *testing.B) {
				run(b, func() error { return ops.LinearBF16(y, x, wb, bias, rows, GELU) })
			})
		}
	}
}
