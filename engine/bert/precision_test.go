package bert

import (
	"strings"
	"testing"

	"needle/internal/testenv"
)

func TestParsePrecision(t *testing.T) {
	for s, want := range map[string]Precision{"": FP16, "fp16": FP16, "int8": Int8} {
		if got, err := ParsePrecision(s); err != nil || got != want {
			t.Errorf("ParsePrecision(%q) = %q, %v", s, got, err)
		}
	}
	if _, err := ParsePrecision("fp32"); err == nil || !strings.Contains(err.Error(), "fp16, int8 or bf16") {
		t.Errorf("fp32: %v", err)
	}
	_, err := ParsePrecision("bf16")
	if err == nil {
		t.Fatal("bf16 accepted: needle has no bf16 kernel")
	}
	if !strings.Contains(err.Error(), "AVX512_BF16") {
		t.Errorf("bf16 on a CPU without it: %v does not name the missing feature", err)
	}
	if _, err := Load(testenv.MiniLMDir(t), Options{Precision: "bf16"}); err == nil {
		t.Error("Load accepted precision bf16")
	}
}

// TestInt8TinyModel loads one tiny checkpoint at both precisions: the int8 encoder's vectors
// stay close to the fp16 ones, and Options reports the precision.
func TestInt8TinyModel(t *testing.T) {
	dir := writeTinyModel(t, tinyWeights(t, 10), "", "F32", nil)
	e16, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e8, err := Load(dir, Options{Precision: Int8})
	if err != nil {
		t.Fatal(err)
	}
	if e16.Options().Precision != FP16 || e8.Options().Precision != Int8 {
		t.Errorf("precisions %q, %q", e16.Options().Precision, e8.Options().Precision)
	}
	if e8.WeightBytes() >= e16.WeightBytes() {
		t.Errorf("int8 weights take %d bytes, fp16 %d", e8.WeightBytes(), e16.WeightBytes())
	}
	a, _ := e16.Encode(tinyTexts, "")
	b, err := e8.Encode(tinyTexts, "")
	if err != nil {
		t.Fatal(err)
	}
	H := tinyConfig.Hidden
	for i := range tinyTexts {
		if c := dot(a[i*H:(i+1)*H], b[i*H:(i+1)*H]); c < 0.999 {
			t.Errorf("text %d: int8 cosine %g with fp16", i, c)
		}
	}
}
