package bert

import (
	"strings"
	"testing"

	"needle/kernels/bert/nn"
	"needle/platform/cpu"
	"needle/testkit/testenv"
)

func TestParsePrecision(t *testing.T) {
	for s, want := range map[string]Precision{"": FP16, "fp16": FP16, "int8": Int8, "bf16": BF16} {
		if got, err := ParsePrecision(s); err != nil || got != want {
			t.Errorf("ParsePrecision(%q) = %q, %v", s, got, err)
		}
	}
	if _, err := ParsePrecision("fp32"); err == nil || !strings.Contains(err.Error(), "fp16, int8 or bf16") {
		t.Errorf("fp32: %v", err)
	}
}

// TestBF16NeedsItsLevel: bf16 runs at the levels with a bf16 GEMM (avx512bf16, ref) and is
// refused at the others, naming what is missing: the CPU's features, or the level NEEDLE_SIMD
// picked. Never a silent fallback to another precision.
func TestBF16NeedsItsLevel(t *testing.T) {
	for _, l := range cpu.Levels() {
		err := BF16.runsOn(nn.New(l))
		if l == cpu.Ref || l >= cpu.AVX512BF16 {
			if err != nil {
				t.Errorf("level %v: %v", l, err)
			}
			continue
		}
		want := "NEEDLE_SIMD selects " + l.String()
		if cpu.Supported() < cpu.AVX512BF16 {
			want = "lacks " + strings.Join(cpu.Missing(cpu.AVX512BF16), ", ")
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("level %v: bf16 error %v, want it to say %q", l, err, want)
		}
	}
	for _, p := range []Precision{FP16, Int8} {
		for _, l := range cpu.Levels() {
			if err := p.runsOn(nn.New(l)); err != nil {
				t.Errorf("%s at level %v: %v", p, l, err)
			}
		}
	}
	if ops, _ := nn.Selected(); !ops.HasBF16() {
		if _, err := Load(testenv.MiniLMDir(t), Options{Precision: BF16}); err == nil {
			t.Errorf("Load accepted precision bf16 at level %v", ops.Level())
		}
	}
}

// TestTinyModelPrecisions loads one tiny checkpoint at each precision: the int8 and bf16
// encoders' vectors stay close to the fp16 ones, and Options reports the precision. (Its
// 8-wide layers pad to one int8 group of 32: bench's TestEncodeReport checks that MiniLM's
// int8 weights are smaller than fp16's.)
func TestTinyModelPrecisions(t *testing.T) {
	dir := writeTinyModel(t, tinyWeights(t, 10), "", "F32", nil)
	e16, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := e16.Encode(tinyTexts, "")
	for _, prec := range []Precision{Int8, BF16} {
		if prec == BF16 && !e16.ops.HasBF16() {
			t.Logf("bf16 skipped: no bf16 GEMM at level %v", e16.ops.Level())
			continue
		}
		e, err := Load(dir, Options{Precision: prec})
		if err != nil {
			t.Fatal(err)
		}
		if e16.Options().Precision != FP16 || e.Options().Precision != prec {
			t.Errorf("precisions %q, %q", e16.Options().Precision, e.Options().Precision)
		}
		b, err := e.Encode(tinyTexts, "")
		if err != nil {
			t.Fatal(err)
		}
		H := tinyConfig.Hidden
		for i := range tinyTexts {
			if c := dot(a[i*H:(i+1)*H], b[i*H:(i+1)*H]); c < 0.999 {
				t.Errorf("text %d: %s cosine %g with fp16", i, prec, c)
			}
		}
	}
}
