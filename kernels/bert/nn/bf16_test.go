package nn

import (
	"errors"
	"math"
	"math/rand"
	"testing"

	"needle/internal/half"
	"needle/platform/cpu"
)

// bf16Levels are the levels with a bf16 GEMM other than Ref on this CPU.
func bf16Levels() []cpu.Level {
	var out []cpu.Level
	for _, l := range simdLevels() {
		if New(l).HasBF16() {
			out = append(out, l)
		}
	}
	return out
}

// bf16Round is the oracle of the rounding: ties to even on the bits, a denormal to zero (DAZ,
// as vcvtneps2bf16), NaN quiet.
func bf16Round(f float32) float32 {
	if u := math.Float32bits(f); u&0x7f800000 == 0 {
		return math.Float32frombits(u & 0x80000000)
	}
	return half.BF16ToFloat32(half.BF16FromFloat32(f))
}

func TestHasBF16(t *testing.T) {
	if !New(cpu.Ref).HasBF16() {
		t.Error("the reference has no bf16 GEMM")
	}
	for _, l := range cpu.Levels() {
		if got, want := New(l).HasBF16(), l == cpu.Ref || l >= cpu.AVX512BF16; got != want {
			t.Errorf("level %v: HasBF16 %v", l, got)
		}
	}
}

// TestLinearBF16RoundsRows multiplies rows by an identity matrix: every output is its input
// rounded to bf16, so the rounding of every level is checked bit for bit against the oracle,
// on ties, denormals, the largest finite values, infinities and NaN. Row r holds special
// value r at column r; in a row whose value rounds to inf or NaN only that column is checked (inf * 0
// is NaN in the others).
func TestLinearBF16RoundsRows(t *testing.T) {
	r := rand.New(rand.NewSource(21))
	const n = 37 // odd: the last pair is padded
	specials := []float32{0, float32(math.Copysign(0, -1)), 1 + 1.0/256, 1 + 3.0/256, 1 + 1.0/512 + 1.0/(1<<23),
		1e-39, -1e-40, math.MaxFloat32, -3.3e38, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.Float32frombits(0x7f7fffff), math.Float32frombits(0x3f808000), math.Float32frombits(0x3f818000), 3}
	rows := len(specials)
	x := randVec(r, rows*n, 10)
	for row, v := range specials {
		x[row*n+row] = v
	}
	eye := make([]float32, n*n)
	for i := range n {
		eye[i*n+i] = 1
	}
	w, err := PackBF16(eye, n, n)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range append([]cpu.Level{cpu.Ref}, bf16Levels()...) {
		y := make([]float32, len(x))
		if err := New(l).LinearBF16(y, x, w, nil, rows, NoAct); err != nil {
			t.Fatal(err)
		}
		for i := range x {
			row, col := i/n, i%n
			if v := float64(bf16Round(specials[row])); (math.IsInf(v, 0) || math.IsNaN(v)) && col != row {
				continue
			}
			want := bf16Round(x[i])
			if math.IsNaN(float64(want)) != math.IsNaN(float64(y[i])) || !math.IsNaN(float64(want)) && y[i] != want {
				t.Fatalf("level %v: x[%d] = %g (%#08x) gives %g, want %g", l, i, x[i], math.Float32bits(x[i]), y[i], want)
			}
		}
	}
}

// bf16Case draws one case of a bf16 Linear test: input rows, fp32 weights, bias and the
// weights packed to bf16.
func bf16Case(t *testing.T, r *rand.Rand, rows, in, out int) (x, wf, b []float32, w *BF16Matrix) {
	t.Helper()
	x, wf, b = randVec(r, rows*in, 1), randVec(r, out*in, 0.05), randVec(r, out, 1)
	w, err := PackBF16(wf, out, in)
	if err != nil {
		t.Fatal(err)
	}
	return x, wf, b, w
}

// TestLinearBF16MatchesReference compares every bf16 level with the reference (float64 sums of
// the same exact products) within float32 summation error: k * 2^-24 * sum |a*w| per output.
func TestLinearBF16MatchesReference(t *testing.T) {
	r := rand.New(rand.NewSource(22))
	for _, shape := range int8Shapes {
		rows, in, out := shape[0], shape[1], shape[2]
		x, wf, b, w := bf16Case(t, r, rows, in, out)
		for _, bias := range [][]float32{nil, b} {
			for _, act := range []Act{NoAct, GELU} {
				want := make([]float32, rows*out)
				if err := New(cpu.Ref).LinearBF16(want, x, w, bias, rows, act); err != nil {
					t.Fatal(err)
				}
				for _, level := range bf16Levels() {
					got := make([]float32, rows*out)
					if err := New(level).LinearBF16(got, x, w, bias, rows, act); err != nil {
						t.Fatal(err)
					}
					for row := range rows {
						for o := range out {
							mag := 0.0
							for i := range in {
								mag += math.Abs(float64(bf16Round(x[row*in+i]) * bf16Round(wf[o*in+i])))
							}
							tol := float64(in+2)*0x1p-24*mag + 1e-6
							if g, w := got[row*out+o], want[row*out+o]; math.Abs(float64(g-w)) > tol {
								t.Fatalf("shape %v act %v level %v: [%d,%d] = %g, reference %g (tolerance %g)",
									shape, act, level, row, o, g, w, tol)
							}
						}
					}
				}
			}
		}
	}
}

// TestLinearBF16Bound checks the reference against float64 math on the unrounded inputs: each
// output is within what rounding x and w to bf16 allows, 2^-7 * sum |x*w| (bf16 keeps 8
// significant bits: each factor within a relative 2^-8).
func TestLinearBF16Bound(t *testing.T) {
	r := rand.New(rand.NewSource(23))
	for _, shape := range int8Shapes {
		rows, in, out := shape[0], shape[1], shape[2]
		x, wf, b, w := bf16Case(t, r, rows, in, out)
		y := make([]float32, rows*out)
		if err := New(cpu.Ref).LinearBF16(y, x, w, b, rows, NoAct); err != nil {
			t.Fatal(err)
		}
		exact := naiveLinear(x, wf, b, rows, in, out, NoAct)
		for row := range rows {
			for o := range out {
				mag := 0.0
				for i := range in {
					mag += math.Abs(float64(x[row*in+i]) * float64(wf[o*in+i]))
				}
				if e := math.Abs(float64(y[row*out+o] - exact[row*out+o])); e > 0x1p-7*mag*1.001+1e-6 {
					t.Fatalf("shape %v [%d,%d]: error %g past the bf16 bound %g", shape, row, o, e, 0x1p-7*mag)
				}
			}
		}
	}
}

func TestLinearBF16BadInput(t *testing.T) {
	var bad *NonFiniteError
	for i, v := range []float32{float32(math.NaN()), float32(math.Inf(-1)), math.MaxFloat32} {
		w := []float32{1, 2, 3, 4, 5, 6}
		w[i+1] = v
		if _, err := PackBF16(w, 2, 3); !errors.As(err, &bad) || bad.Index != i+1 {
			t.Errorf("PackBF16 of %g: %v", v, err)
		}
	}
	if _, err := PackBF16(make([]float32, 5), 2, 3); err == nil {
		t.Error("PackBF16 accepted a short matrix")
	}
	m, err := PackBF16([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	ops := New(cpu.Ref)
	if err := ops.LinearBF16(make([]float32, 3), make([]float32, 6), m, nil, 2, NoAct); err == nil {
		t.Error("LinearBF16 accepted a short output buffer")
	}
	if err := ops.LinearBF16(make([]float32, 4), make([]float32, 6), m, make([]float32, 1), 2, NoAct); err == nil {
		t.Error("LinearBF16 accepted a short bias")
	}
	if err := ops.LinearBF16(make([]float32, 4), make([]float32, 6), nil, nil, 2, NoAct); err == nil {
		t.Error("LinearBF16 accepted nil weights")
	}
	for _, l := range cpu.Levels() {
		if New(l).HasBF16() {
			continue
		}
		if err := New(l).LinearBF16(make([]float32, 4), make([]float32, 6), m, nil, 2, NoAct); err == nil {
			t.Errorf("level %v has no bf16 GEMM, yet LinearBF16 answered", l)
		}
	}
}

// TestPeak: every vector level measures a ceiling for each format it has a Linear for; the
// reference and the levels without bf16 report none. (Values are machine timings: logged.)
func TestPeak(t *testing.T) {
	for _, l := range cpu.Levels() {
		for _, f := range []Format{FP16, Int8, BF16} {
			got := New(l).Peak(f, 1, 0.01)
			if want := l != cpu.Ref && (f != BF16 || New(l).HasBF16()); (got > 0) != want || math.IsInf(got, 0) {
				t.Errorf("level %v format %d: peak %g", l, f, got)
			}
			t.Logf("level %v format %d: %.1f GOP/s on 1 thread", l, f, got/1e9)
		}
	}
}

// TestPairLinearsStop: LinearInt8 and LinearBF16 with a Stop set before the call write nothing
// and return ErrStopped; with one never set they give the bits of a call without.
func TestPairLinearsStop(t *testing.T) {
	r := rand.New(rand.NewSource(24))
	const rows, in, out = 200, 96, 80
	x, wf := randVec(r, rows*in, 1), randVec(r, out*in, 0.1)
	q8, err := PackInt8(wf, out, in)
	if err != nil {
		t.Fatal(err)
	}
	bf, err := PackBF16(wf, out, in)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := Selected()
	if err != nil {
		t.Fatal(err)
	}
	if !ops.HasBF16() {
		ops = New(cpu.Ref)
	}
	set := new(Stop)
	set.Set()
	for name, linear := range map[string]func(Ops, []float32) error{
		"int8": func(o Ops, y []float32) error { return o.LinearInt8(y, x, q8, nil, rows, GELU) },
		"bf16": func(o Ops, y []float32) error { return o.LinearBF16(y, x, bf, nil, rows, GELU) },
	} {
		want, got := make([]float32, rows*out), make([]float32, rows*out)
		if err := linear(ops, want); err != nil {
			t.Fatal(err)
		}
		if err := linear(ops.WithStop(new(Stop)), got); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: with an unset Stop [%d] = %g, without %g", name, i, got[i], want[i])
			}
		}
		clear(got)
		if err := linear(ops.WithStop(set), got); err != ErrStopped {
			t.Fatalf("%s with a set Stop: %v, want ErrStopped", name, err)
		}
		for i, v := range got {
			if v != 0 {
				t.Fatalf("%s with a set Stop wrote y[%d] = %g", name, i, v)
			}
		}
	}
}
