package synth

// The versions of a model that `needle bench weights` (and weight-transfer tests) publish:
// safetensors images (header and data in one byte slice) with seeded pseudo-random contents,
// and the next version of one with a given fraction of its 2- and 4-byte elements changed the
// way an optimizer step changes them (lowest bits); in place for the benchmark's multi-GB
// models, which live in the sender's halves (Optimizer).

import (
	"encoding/binary"
	"fmt"
	"math"

	"needle/safetensors"
)

// Tensor is a tensor to lay out: name, dtype, shape.
type Tensor struct {
	Name  string
	DType string
	Shape []int64
}

// T is a Tensor, for short tensor lists in tests.
func T(name, dtype string, shape ...int64) Tensor {
	return Tensor{Name: name, DType: dtype, Shape: shape}
}

// Image returns the bytes of a safetensors file holding tensors, filled from seed (Fill), and
// its header length. Metadata is {"format": "pt"}, as transformers expects.
func Image(tensors []Tensor, seed uint64) ([]byte, int) {
	header, size := Header(tensors)
	img := make([]byte, int64(len(header))+size)
	copy(img, header)
	Fill(img, seed)
	return img, len(header)
}

// Header returns the safetensors header of tensors and the size of their data section.
func Header(tensors []Tensor) ([]byte, int64) {
	st := make([]safetensors.Tensor, len(tensors))
	for i, t := range tensors {
		st[i] = safetensors.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape}
	}
	header, laid, err := safetensors.EncodeHeader(st, map[string]string{"format": "pt"})
	if err != nil {
		panic(fmt.Sprintf("synth: %v", err)) // the callers' own tensor lists
	}
	var size int64
	if len(laid) > 0 {
		size = laid[len(laid)-1].End
	}
	return header, size
}

// Fill fills the data section of img (a whole file, header in place) from seed: BF16 tensors
// with weights as a trained model holds them (a triangular distribution of scale 0.02, so that
// exponent bytes cluster as real ones do), other tensors with random bits.
func Fill(img []byte, seed uint64) {
	hdr, tensors := parse(img)
	s := seed | 1
	for _, t := range tensors {
		data := img[int64(hdr)+t.Begin : int64(hdr)+t.End]
		if t.DType == "BF16" {
			for i := 0; i+2 <= len(data); i += 2 {
				a, b := next(&s), next(&s)
				w := (float32(a>>40)/(1<<24) + float32(b>>40)/(1<<24) - 1) * 0.04
				binary.LittleEndian.PutUint16(data[i:], uint16(math.Float32bits(w)>>16))
			}
			continue
		}
		for i := 0; i+8 <= len(data); i += 8 {
			binary.LittleEndian.PutUint64(data[i:], next(&s))
		}
		for i := len(data) &^ 7; i < len(data); i++ {
			data[i] = byte(next(&s))
		}
	}
}

func parse(img []byte) (int, []safetensors.Tensor) {
	hdr := int(binary.LittleEndian.Uint64(img)) + 8
	tensors, _, err := safetensors.ParseHeader(img[:hdr], int64(len(img)-hdr))
	if err != nil {
		panic(fmt.Sprintf("synth: %v", err))
	}
	return hdr, tensors
}

// Step returns a copy of img with Perturb applied.
func Step(img []byte, frac float64, seed uint64) []byte {
	out := append([]byte(nil), img...)
	Perturb(out, frac, seed)
	return out
}

// Perturb changes about frac of the elements of every 2- and 4-byte tensor of img (a whole
// file) in their lowest bits by 1 to 3 units, at gaps drawn from seed: what an optimizer step
// at a small learning rate does to bf16 weights. Other tensors are unchanged.
func Perturb(img []byte, frac float64, seed uint64) {
	hdr, tensors := parse(img)
	s := seed | 1
	maxGap := uint64(2/frac) - 1 // gaps uniform in [1, maxGap]: mean 1/frac
	for _, t := range tensors {
		es := safetensors.DTypeSize(t.DType)
		if es != 2 && es != 4 {
			continue
		}
		data := img[int64(hdr)+t.Begin : int64(hdr)+t.End]
		for i := next(&s) % maxGap; i*uint64(es) < uint64(len(data)); i += 1 + next(&s)%maxGap {
			data[i*uint64(es)] ^= byte(1 + next(&s)%3)
		}
	}
}

// next is xorshift64*: fast, seeded, the same stream on every machine.
func next(s *uint64) uint64 {
	*s ^= *s >> 12
	*s ^= *s << 25
	*s ^= *s >> 27
	return *s * 2685821657736338717
}
