package bert

import (
	"fmt"
	"strings"

	"needle/kernels/bert/nn"
	"needle/platform/cpu"
)

// Precision is the number format of the Linear layers (the encoder's GEMMs); everything else
// (embeddings, LayerNorm, attention, activations between layers) stays fp32.
type Precision string

const (
	// FP16 weights, fp32 products and sums: the default, within 1e-5 cosine of fp32.
	FP16 Precision = "fp16"
	// Int8 weights per output channel and int16 activations per row, exact int32 sums
	// (nn.LinearInt8): faster, within 4e-3 cosine of fp32 on the golden texts.
	Int8 Precision = "int8"
	// BF16 weights and activations, fp32 sums (nn.LinearBF16, vdpbf16ps): twice fp16's
	// multiply rate where the CPU has AVX512_BF16, within 1e-4 cosine of fp32.
	BF16 Precision = "bf16"
)

// PrecisionHelp is the help of a --precision flag (the Options tables of serve, build, encode).
const PrecisionHelp = "encoder Linear layers: fp16 (weights fp16, math fp32: the exact default), bf16 (weights and activations bf16, fp32 sums: about 2x fp16's multiply rate, cosine >= 0.9999 with fp32 on MiniLM; needs AVX512_BF16) or int8 (int8 weights per output and group of 32 inputs, int16 activations, int32 sums: cosine >= 0.999; any CPU)"

// ParsePrecision reads a --precision value ("" is FP16).
func ParsePrecision(s string) (Precision, error) {
	switch p := Precision(s); p {
	case "", FP16:
		return FP16, nil
	case Int8, BF16:
		return p, nil
	}
	return "", fmt.Errorf("precision %q: want fp16, int8 or bf16", s)
}

// format is the nn Linear of p.
func (p Precision) format() nn.Format {
	switch p {
	case Int8:
		return nn.Int8
	case BF16:
		return nn.BF16
	}
	return nn.FP16
}

// runsOn refuses a precision the ops' SIMD level cannot run: bf16 needs the avx512bf16 level
// (or the scalar reference, NEEDLE_SIMD=ref). Never a silent fallback: the embeddings would differ.
func (p Precision) runsOn(ops nn.Ops) error {
	if p != BF16 || ops.HasBF16() {
		return nil
	}
	if missing := cpu.Missing(cpu.AVX512BF16); len(missing) > 0 {
		return fmt.Errorf("precision bf16 needs a CPU with AVX512_BF16 (SIMD level avx512bf16); this one lacks %s: use fp16 or int8",
			strings.Join(missing, ", "))
	}
	return fmt.Errorf("precision bf16 needs SIMD level avx512bf16 (or ref), but NEEDLE_SIMD selects %v", ops.Level())
}
