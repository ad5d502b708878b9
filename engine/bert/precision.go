package bert

import "fmt"

// Precision is the number format of the Linear layers (the encoder's GEMMs); everything else
// (embeddings, LayerNorm, attention, activations between layers) stays fp32.
type Precision string

const (
	// FP16 weights, fp32 products and sums: the default, within 1e-5 cosine of fp32.
	FP16 Precision = "fp16"
	// Int8 weights per output channel and int8 activations per row, exact int32 sums
	// (nn.LinearInt8): faster, within 1e-3 cosine of fp32 on the golden texts.
	Int8 Precision = "int8"
	// BF16 is named so that asking for it gets a clear answer; needle has no bf16 kernel yet.
	BF16 Precision = "bf16"
)

// ParsePrecision reads a --precision value ("" is FP16). A precision this CPU or needle cannot
// run is an error that says which, never a silent fallback: the embeddings would differ.
func ParsePrecision(s string) (Precision, error) {
	switch p := Precision(s); p {
	case "", FP16:
		return FP16, nil
	case Int8:
		return Int8, nil
	case BF16:
		// Refused on every CPU, so no feature check: the kernel does not exist.
		return "", fmt.Errorf("precision bf16 needs a bf16 kernel (for AVX512_BF16 or AMX-BF16 CPUs), which needle does not have yet: use fp16 or int8")
	}
	return "", fmt.Errorf("precision %q: want fp16, int8 or bf16", s)
}
