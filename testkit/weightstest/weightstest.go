// Package weightstest makes the versions of a model that weight-transfer tests and
// benchmarks publish: safetensors images (header and data in one byte slice) with seeded
// pseudo-random contents, and the next version of one with a given fraction of its 2- and
// 4-byte elements changed the way an optimizer step changes them (lowest bits).
package weightstest

import (
	"encoding/binary"
	"fmt"

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

// Image returns the bytes of a safetensors file holding tensors, filled from seed, and its
// header length. Metadata is {"format": "pt"}, as transformers expects.
func Image(tensors []Tensor, seed uint64) ([]byte, int) {
	st := make([]safetensors.Tensor, len(tensors))
	for i, t := range tensors {
		st[i] = safetensors.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape}
	}
	header, laid, err := safetensors.EncodeHeader(st, map[string]string{"format": "pt"})
	if err != nil {
		panic(fmt.Sprintf("weightstest: %v", err)) // the tests' own tensor lists
	}
	var size int64
	if len(laid) > 0 {
		size = laid[len(laid)-1].End
	}
	img := make([]byte, int64(len(header))+size)
	copy(img, header)
	s := seed | 1
	data := img[len(header):]
	for i := 0; i+8 <= len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], next(&s))
	}
	for i := len(data) &^ 7; i < len(data); i++ {
		data[i] = byte(next(&s))
	}
	return img, len(header)
}

// Step returns a copy of img (a file of header length hdr) with about frac of the elements of
// every 2- and 4-byte tensor changed in their lowest bits, at gaps drawn from seed: what an
// optimizer step at a small learning rate does to bf16 weights. Other tensors are unchanged.
func Step(img []byte, frac float64, seed uint64) []byte {
	out := append([]byte(nil), img...)
	hdr := int(binary.LittleEndian.Uint64(img)) + 8
	tensors, _, err := safetensors.ParseHeader(img[:hdr], int64(len(img)-hdr))
	if err != nil {
		panic(fmt.Sprintf("weightstest: %v", err))
	}
	s := seed | 1
	maxGap := uint64(2/frac) - 1 // gaps uniform in [1, maxGap]: mean 1/frac
	for _, t := range tensors {
		es := safetensors.DTypeSize(t.DType)
		if es != 2 && es != 4 {
			continue
		}
		data := out[int64(hdr)+t.Begin : int64(hdr)+t.End]
		for i := next(&s) % maxGap; i*uint64(es) < uint64(len(data)); i += 1 + next(&s)%maxGap {
			data[i*uint64(es)] ^= byte(1 + next(&s)%3)
		}
	}
	return out
}

// next is xorshift64*: fast, seeded, the same stream on every machine.
func next(s *uint64) uint64 {
	*s ^= *s >> 12
	*s ^= *s << 25
	*s ^= *s >> 27
	return *s * 2685821657736338717
}
