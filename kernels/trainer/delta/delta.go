// Package delta diffs and patches weight tensors as raw bits: Encode lists the elements
// whose bits changed between two versions of a tensor (with their new bits), Apply writes
// them into the old version. bf16/fp16 (2-byte) and fp32 (4-byte) elements are compared
// as integers, so NaN payloads and -0.0 are changes like any other, and Apply reproduces
// the new tensor bit for bit. The kernels are C (scalar reference, AVX2, AVX-512; delta.h)
// picked by package platform/cpu. The records that carry a Sparse between processes
// (AstraFlow's layout, needle's packed one) are package weights/wire's.
package delta

/*
#cgo CFLAGS: -O2 -std=c11 -Wall
#include "delta.h"
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"
	"unsafe"

	"needle/platform/cpu"
)

// Sparse is the changed elements of one tensor. Indices and Values are little-endian
// bytes laid out as on the wire (AstraFlow), so they are written without conversion.
// A Sparse owns its slices unless it came from a parse, where they view the record.
type Sparse struct {
	Len       int64  // elements in the tensor
	ElemSize  int    // bytes per element: 2 (bf16, fp16) or 4 (fp32)
	IndexSize int    // bytes per index, 4 or 8: IndexSizeFor(Len) when Encode made it
	Indices   []byte // Count() strictly increasing indices, IndexSize bytes each
	Values    []byte // the new bits of each changed element, ElemSize bytes each
}

// Count is the number of changed elements.
func (s *Sparse) Count() int64 { return int64(len(s.Values) / s.ElemSize) }

// Index returns the k-th changed index.
func (s *Sparse) Index(k int64) uint64 {
	if s.IndexSize == 4 {
		return uint64(binary.LittleEndian.Uint32(s.Indices[4*k:]))
	}
	return binary.LittleEndian.Uint64(s.Indices[8*k:])
}

// IndexSizeFor is the index width AstraFlow uses for a tensor of n elements: 4 bytes,
// or 8 when n > 2^32-1.
func IndexSizeFor(n int64) int {
	if n > math.MaxUint32 {
		return 8
	}
	return 4
}

// CheckElemSize accepts 2 and 4, the widths of bf16/fp16 and fp32.
func CheckElemSize(elemSize int) error {
	if elemSize != 2 && elemSize != 4 {
		return fmt.Errorf("element size %d is not 2 (bf16/fp16) or 4 (fp32)", elemSize)
	}
	return nil
}

const errLen = 256

func cErr(buf []C.char) error { return fmt.Errorf("%s", C.GoString(&buf[0])) }

func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// encodeChunk runs one C encode of oldBits vs newBits at level l, numbering elements from
// first and appending to s (whose buffers must have room for every element).
func encodeChunk(l cpu.Level, s *Sparse, oldBits, newBits []byte, first uint64) error {
	var errBuf [errLen]C.char
	n := len(oldBits) / s.ElemSize
	nIdx, nVal := len(s.Indices), len(s.Values)
	idx := s.Indices[nIdx : nIdx+n*s.IndexSize]
	vals := s.Values[nVal : nVal+n*s.ElemSize]
	got := C.nl_delta_encode(C.int32_t(l), ptr(oldBits), ptr(newBits), C.int64_t(n), C.int32_t(s.ElemSize),
		C.uint64_t(first), ptr(idx), C.int32_t(s.IndexSize), ptr(vals), &errBuf[0], errLen)
	if got < 0 {
		return cErr(errBuf[:])
	}
	s.Indices = s.Indices[:nIdx+int(got)*s.IndexSize]
	s.Values = s.Values[:nVal+int(got)*s.ElemSize]
	return nil
}

// Encode sets dst to the elements whose bits differ between oldBits and newBits (same
// length, elemSize bytes per element), reusing dst's buffers. threads > 1 splits the
// tensor into that many ranges encoded concurrently. dst needs up to
// len/elemSize*(IndexSize+elemSize) bytes (all changed); it keeps them for the next call.
func Encode(dst *Sparse, oldBits, newBits []byte, elemSize, threads int) error {
	l, err := cpu.Selected()
	if err != nil {
		return err
	}
	return encode(l, dst, oldBits, newBits, elemSize, threads)
}

func encode(l cpu.Level, dst *Sparse, oldBits, newBits []byte, elemSize, threads int) error {
	if err := CheckElemSize(elemSize); err != nil {
		return err
	}
	if len(oldBits) != len(newBits) {
		return fmt.Errorf("old tensor has %d bytes, new has %d", len(oldBits), len(newBits))
	}
	if len(oldBits)%elemSize != 0 {
		return fmt.Errorf("tensor of %d bytes is not a whole number of %d-byte elements", len(oldBits), elemSize)
	}
	n := int64(len(oldBits) / elemSize)
	is := IndexSizeFor(n)
	*dst = Sparse{Len: n, ElemSize: elemSize, IndexSize: is,
		Indices: grow(dst.Indices, n*int64(is)), Values: grow(dst.Values, n*int64(elemSize))}
	if threads <= 1 || n < 1<<16 {
		return encodeChunk(l, dst, oldBits, newBits, 0)
	}
	// Range t encodes into dst's buffers at the offset of its first element (room for all
	// of its elements); the results are then moved down to follow each other, in order.
	parts := make([]Sparse, threads)
	errs := make([]error, threads)
	var wg sync.WaitGroup
	for t := range parts {
		lo, hi := n*int64(t)/int64(threads), n*int64(t+1)/int64(threads)
		parts[t] = Sparse{Len: n, ElemSize: elemSize, IndexSize: is,
			Indices: dst.Indices[lo*int64(is) : lo*int64(is) : hi*int64(is)],
			Values:  dst.Values[lo*int64(elemSize) : lo*int64(elemSize) : hi*int64(elemSize)]}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, e := lo*int64(elemSize), hi*int64(elemSize)
			errs[t] = encodeChunk(l, &parts[t], oldBits[b:e], newBits[b:e], uint64(lo))
		}()
	}
	wg.Wait()
	for t := range parts {
		if errs[t] != nil {
			return errs[t]
		}
		dst.Indices = append(dst.Indices, parts[t].Indices...)
		dst.Values = append(dst.Values, parts[t].Values...)
	}
	return nil
}

// grow returns b[:0] with capacity for at least n bytes.
func grow(b []byte, n int64) []byte {
	if int64(cap(b)) < n {
		return make([]byte, 0, n)
	}
	return b[:0]
}

// PayloadLayout is how AppendPackedPayload laid out a payload's gap stream.
type PayloadLayout struct {
	Width    int   // bytes per gap word: 1, 2 or 4
	GapBytes int64 // the gap stream's length, before the planes
}

// AppendPackedPayload appends to dst the payload of a packed record of weights/wire (its
// codec.go has the format) for s, the delta from oldBits: the gap stream in words of width
// bytes (0: the width of the shortest stream), byte planes 0 to planes-1 of the values, and
// with exceptions the entries whose bytes from planes on differ from oldBits'
// (nl_delta_packed_payload). dst grows to the longest payload first, so the payload is
// written once, in place.
func AppendPackedPayload(dst []byte, s *Sparse, oldBits []byte, width, planes int, exceptions bool) ([]byte, PayloadLayout, error) {
	widths := []int{width}
	switch width {
	case 0:
		widths = []int{1, 2, 4}
	case 1, 2, 4:
	default:
		return nil, PayloadLayout{}, fmt.Errorf("gap width %d is not 1, 2 or 4 (or 0: the shortest)", width)
	}
	if planes < 1 || planes > s.ElemSize {
		return nil, PayloadLayout{}, fmt.Errorf("%d byte planes of %d-byte values", planes, s.ElemSize)
	}
	if err := s.Check(len(oldBits)); err != nil { // the kernel reads oldBits at every index
		return nil, PayloadLayout{}, err
	}
	// Every entry takes one gap word and the escapes at most Len/M more (the gaps add up to
	// less than Len); the exceptions are written 10 bytes on, then moved behind their count.
	nnz, gapRoom := s.Count(), int64(0)
	for _, w := range widths {
		gapRoom = max(gapRoom, int64(w)*(nnz+s.Len/(1<<(8*w)-1)+1))
	}
	bound := gapRoom + nnz*int64(planes)
	ex := C.int32_t(0)
	if exceptions {
		bound += 10 + nnz*int64(10+s.ElemSize-planes)
		ex = 1
	}
	dst = slices.Grow(dst, int(bound))
	out := dst[len(dst):cap(dst)]
	var used C.int32_t
	var gapBytes C.int64_t
	n := C.nl_delta_packed_payload(ptr(oldBits), C.int32_t(s.ElemSize), ptr(s.Indices), C.int32_t(s.IndexSize),
		ptr(s.Values), C.int64_t(nnz), C.int32_t(width), C.int32_t(planes), ex, ptr(out), &used, &gapBytes)
	return dst[:len(dst)+int(n)], PayloadLayout{Width: int(used), GapBytes: int64(gapBytes)}, nil
}

// Check verifies s against a tensor of len(base)/s.ElemSize elements: sizes, strictly
// increasing indices, all in range.
func (s *Sparse) Check(baseLen int) error {
	l, err := cpu.Selected()
	if err != nil {
		return err
	}
	return s.check(l, baseLen)
}

func (s *Sparse) check(l cpu.Level, baseLen int) error {
	if err := CheckElemSize(s.ElemSize); err != nil {
		return err
	}
	if baseLen != int(s.Len)*s.ElemSize {
		return fmt.Errorf("delta is for %d elements of %d bytes, tensor has %d bytes", s.Len, s.ElemSize, baseLen)
	}
	if s.IndexSize != 4 && s.IndexSize != 8 {
		return fmt.Errorf("index size %d is not 4 or 8", s.IndexSize)
	}
	if len(s.Values)%s.ElemSize != 0 || int64(len(s.Indices)) != s.Count()*int64(s.IndexSize) {
		return fmt.Errorf("%d index bytes and %d value bytes do not describe the same count", len(s.Indices), len(s.Values))
	}
	return s.checkIndices(l)
}

// checkIndices runs the C check of s's indices against s.Len.
func (s *Sparse) checkIndices(l cpu.Level) error {
	var errBuf [errLen]C.char
	if C.nl_delta_check(C.int32_t(l), ptr(s.Indices), C.int32_t(s.IndexSize), C.int64_t(s.Count()),
		C.uint64_t(s.Len), &errBuf[0], errLen) != 0 {
		return cErr(errBuf[:])
	}
	return nil
}

// Apply writes s into base in place after checking it (Check); on error base is
// untouched. threads > 1 scatters disjoint ranges of entries concurrently.
func Apply(base []byte, s *Sparse, threads int) error { return ApplyLow(base, s, s.ElemSize, threads) }

// ApplyLow is Apply writing only the first nb bytes of each value, the whole value or its low
// half (values are little-endian): for a record that keeps the base's high bytes of most
// entries.
func ApplyLow(base []byte, s *Sparse, nb, threads int) error {
	if nb != s.ElemSize && 2*nb != s.ElemSize {
		return fmt.Errorf("writing %d bytes of each %d-byte value: the whole value or its low half only", nb, s.ElemSize)
	}
	if err := s.Check(len(base)); err != nil {
		return err
	}
	nnz := s.Count()
	if threads <= 1 || nnz < 1<<14 {
		scatter(base, s, nb, 0, nnz)
		return nil
	}
	var wg sync.WaitGroup
	for t := range threads {
		lo, hi := nnz*int64(t)/int64(threads), nnz*int64(t+1)/int64(threads)
		wg.Add(1)
		go func() {
			defer wg.Done()
			scatter(base, s, nb, lo, hi)
		}()
	}
	wg.Wait()
	return nil
}

// scatter writes the first nb bytes of entries [lo, hi) of a checked s into base.
func scatter(base []byte, s *Sparse, nb int, lo, hi int64) {
	if hi == lo {
		return
	}
	C.nl_delta_scatter(unsafe.Pointer(&base[0]), C.int32_t(s.ElemSize), C.int32_t(nb),
		unsafe.Pointer(&s.Indices[lo*int64(s.IndexSize)]), C.int32_t(s.IndexSize),
		unsafe.Pointer(&s.Values[lo*int64(s.ElemSize)]), C.int64_t(hi-lo))
}
