package logprob

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"needle/internal/half"
	"needle/platform/cpu"
)

// tensor is a test input: the logits as float64 (exactly the values the kernel decodes) and
// their encoding in one dtype.
type tensor struct {
	rows, vocab int
	vals        []float64
	x           Logits
}

// encode rounds vals to dtype (bf16/f16 by truncation/conversion of the fp32 value) and keeps
// the rounded values as the reference's input.
func encode(dtype DType, rows, vocab int, vals []float64) tensor {
	data := make([]byte, len(vals)*dtype.Size())
	out := make([]float64, len(vals))
	for i, v := range vals {
		out[i] = put(dtype, data, i, float32(v))
	}
	return tensor{rows, vocab, out, Logits{DType: dtype, Rows: rows, Vocab: vocab, Data: data}}
}

// put stores f as element i of data in dtype and returns the value the kernel reads back.
func put(dtype DType, data []byte, i int, f float32) float64 {
	switch dtype {
	case F32:
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(f))
		return float64(f)
	case BF16:
		b := half.BF16FromFloat32(f)
		binary.LittleEndian.PutUint16(data[2*i:], b)
		return float64(half.BF16ToFloat32(b))
	default:
		h := half.FromFloat32(f)
		binary.LittleEndian.PutUint16(data[2*i:], h)
		return float64(half.ToFloat32(h))
	}
}

// reference computes verl's outputs in float64 (the oracle of every level and of the C ABI).
func reference(rows, vocab int, vals []float64, labels []int64, temp float64, ignore int64) (lp, ent, lse []float64) {
	lp, ent, lse = make([]float64, rows), make([]float64, rows), make([]float64, rows)
	for i := 0; i < rows; i++ {
		y := vals[i*vocab : (i+1)*vocab]
		m, hasNaN := math.Inf(-1), false
		for _, v := range y {
			hasNaN = hasNaN || math.IsNaN(v)
			m = math.Max(m, v/temp)
		}
		var s, sy float64
		for _, v := range y {
			if !math.IsInf(v, -1) {
				e := math.Exp(v/temp - m)
				s += e
				sy += e * (v / temp)
			}
		}
		lse[i] = m + math.Log(s)
		ent[i] = lse[i] - sy/s
		if hasNaN {
			lse[i], ent[i] = math.NaN(), math.NaN()
		}
		if labels[i] != ignore {
			lp[i] = y[labels[i]]/temp - lse[i]
		}
	}
	return lp, ent, lse
}

// close reports whether got matches want to 1e-5 relative (absolute below magnitude 1);
// NaN must match NaN and infinities must be equal.
func close(got float32, want float64) bool {
	g := float64(got)
	switch {
	case math.IsNaN(want):
		return math.IsNaN(g)
	case math.IsInf(want, 0):
		return g == want
	}
	return math.Abs(g-want) <= 1e-5*math.Max(1, math.Abs(want))
}

func compare(t *testing.T, what string, got Output, lp, ent, lse []float64) {
	t.Helper()
	bad := 0
	for i := range lp {
		for _, c := range []struct {
			name string
			g    float32
			w    float64
		}{{"logprob", got.Logprob[i], lp[i]}, {"entropy", got.Entropy[i], ent[i]}, {"lse", got.LSE[i], lse[i]}} {
			if !close(c.g, c.w) && bad < 5 {
				bad++
				t.Errorf("%s row %d %s = %v, want %v", what, i, c.name, c.g, c.w)
			}
		}
	}
}

func newOutput(rows int) Output {
	return Output{Logprob: make([]float32, rows), Entropy: make([]float32, rows), LSE: make([]float32, rows)}
}

// shapeCase is one edge shape and how to fill it.
type shapeCase struct {
	name        string
	rows, vocab int
	fill        func(r *rand.Rand, row, col int) float64
}

func randn(scale float64) func(r *rand.Rand, row, col int) float64 {
	return func(r *rand.Rand, _, _ int) float64 { return r.NormFloat64() * scale }
}

var shapeCases = []shapeCase{
	{"empty", 0, 7, randn(3)},
	{"one-by-one", 1, 1, randn(3)},
	{"one-row", 1, 15, randn(3)},
	{"odd", 3, 17, randn(3)},
	{"vector-multiple", 5, 64, randn(3)},
	{"odd-vocab", 7, 1001, randn(5)},
	{"wide-range", 4, 333, randn(40)},
	{"qwen-7b-vocab", 8, 152064, randn(4)},
	{"all-equal", 3, 1000, func(*rand.Rand, int, int) float64 { return 1.25 }},
	{"neg-inf", 5, 300, func(r *rand.Rand, row, col int) float64 {
		if col%3 == 0 || (row == 4 && col < 200) {
			return math.Inf(-1)
		}
		return r.NormFloat64() * 3
	}},
	{"pos-inf-row", 3, 150, func(r *rand.Rand, row, col int) float64 {
		if row == 1 && col == 70 {
			return math.Inf(1)
		}
		return r.NormFloat64() * 3
	}},
	{"nan-row", 4, 200, func(r *rand.Rand, row, col int) float64 {
		if row == 2 && col == 150 {
			return math.NaN()
		}
		return r.NormFloat64() * 3
	}},
}

func (c shapeCase) build(dtype DType, seed int64) (tensor, []int64) {
	r := rand.New(rand.NewSource(seed))
	vals := make([]float64, c.rows*c.vocab)
	for i := range vals {
		vals[i] = c.fill(r, i/c.vocab, i%c.vocab)
	}
	labels := make([]int64, c.rows)
	for i := range labels {
		labels[i] = int64(r.Intn(c.vocab))
		if i%4 == 3 {
			labels[i] = DefaultIgnoreIndex
		}
	}
	if c.name == "neg-inf" && c.rows > 0 {
		labels[0] = 0 // a label on a -inf entry: logprob -inf
	}
	return encode(dtype, c.rows, c.vocab, vals), labels
}

func TestLevelsMatchFloat64Reference(t *testing.T) {
	for _, level := range cpu.LevelsUpTo(cpu.AVX512) {
		for _, dtype := range []DType{F32, F16, BF16} {
			for _, temp := range []float32{1, 0.7} {
				for ci, c := range shapeCases {
					for _, threads := range []int{1, 3} {
						name := fmt.Sprintf("%v/%v/T=%v/%s/threads=%d", level, dtype, temp, c.name, threads)
						in, labels := c.build(dtype, int64(ci))
						opt := DefaultOptions()
						opt.Temperature, opt.Threads = temp, threads
						out := newOutput(c.rows)
						if err := ComputeAt(level, in.x, labels, opt, out); err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						lp, ent, lse := reference(c.rows, c.vocab, in.vals, labels, float64(temp), DefaultIgnoreIndex)
						compare(t, name, out, lp, ent, lse)
					}
				}
			}
		}
	}
}

// TestNaNRowIsolated pins the documented NaN behaviour: only the NaN row is NaN.
func TestNaNRowIsolated(t *testing.T) {
	for _, level := range cpu.LevelsUpTo(cpu.AVX512) {
		in, labels := shapeCases[len(shapeCases)-1].build(BF16, 9)
		labels[2] = 5
		out := newOutput(in.rows)
		if err := ComputeAt(level, in.x, labels, DefaultOptions(), out); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < in.rows; i++ {
			nan := math.IsNaN(float64(out.Logprob[i])) && math.IsNaN(float64(out.LSE[i])) && math.IsNaN(float64(out.Entropy[i]))
			if nan != (i == 2) {
				t.Errorf("%v row %d: logprob %v lse %v entropy %v", level, i, out.Logprob[i], out.LSE[i], out.Entropy[i])
			}
		}
	}
}

func TestOptionalOutputsMayBeNil(t *testing.T) {
	in, labels := shapeCases[3].build(F32, 1)
	full, lp := newOutput(in.rows), make([]float32, in.rows)
	if err := Compute(in.x, labels, DefaultOptions(), full); err != nil {
		t.Fatal(err)
	}
	if err := Compute(in.x, labels, DefaultOptions(), Output{Logprob: lp}); err != nil {
		t.Fatal(err)
	}
	for i := range lp {
		if lp[i] != full.Logprob[i] {
			t.Fatalf("row %d: %v without entropy/lse, %v with", i, lp[i], full.Logprob[i])
		}
	}
}

func TestBadInput(t *testing.T) {
	in, labels := shapeCases[3].build(BF16, 2) // 3 x 17
	good := DefaultOptions()
	withTemp := func(v float32) Options { o := good; o.Temperature = v; return o }
	withLabel := func(i int, v int64) []int64 { l := append([]int64(nil), labels...); l[i] = v; return l }
	short := in.x
	short.Data = short.Data[:len(short.Data)-2]
	wrongType := in.x
	wrongType.DType = 7
	cases := []struct {
		name   string
		x      Logits
		labels []int64
		opt    Options
		out    Output
		want   string
	}{
		{"label too big", in.x, withLabel(1, 17), good, newOutput(3), "labels[1] = 17 is outside [0, 17)"},
		{"label negative", in.x, withLabel(2, -1), good, newOutput(3), "labels[2] = -1"},
		{"temperature zero", in.x, labels, withTemp(0), newOutput(3), "temperature 0"},
		{"temperature negative", in.x, labels, withTemp(-1), newOutput(3), "temperature -1"},
		{"temperature NaN", in.x, labels, withTemp(float32(math.NaN())), newOutput(3), "temperature"},
		{"temperature inf", in.x, labels, withTemp(float32(math.Inf(1))), newOutput(3), "temperature"},
		{"short logits", short, labels, good, newOutput(3), "logits: 100 bytes, want 102"},
		{"bad dtype", wrongType, labels, good, newOutput(3), "unknown dtype"},
		{"labels length", in.x, labels[:2], good, newOutput(3), "labels has 2 entries, want 3"},
		{"output length", in.x, labels, good, Output{Logprob: make([]float32, 2)}, "logprob output has 2 floats"},
		{"entropy length", in.x, labels, good, Output{Logprob: make([]float32, 3), Entropy: make([]float32, 1)}, "entropy output"},
	}
	for _, c := range cases {
		before := append([]float32(nil), c.out.Logprob...)
		err := Compute(c.x, c.labels, c.opt, c.out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", c.name, err, c.want)
		}
		for i := range before {
			if c.out.Logprob[i] != before[i] {
				t.Errorf("%s: output written despite the error", c.name)
			}
		}
	}
}

func TestParseDType(t *testing.T) {
	for _, d := range []DType{F32, F16, BF16} {
		if got, err := ParseDType(strings.ToUpper(d.String())); err != nil || got != d {
			t.Errorf("ParseDType(%q) = %v, %v", strings.ToUpper(d.String()), got, err)
		}
	}
	if _, err := ParseDType("f8"); err == nil {
		t.Error("ParseDType accepted f8")
	}
}
