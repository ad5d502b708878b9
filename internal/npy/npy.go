// Package npy writes NumPy .npy headers, for the float32 and int64 arrays needle writes
// (`needle encode --npy`, the files of a Milvus bulk import). Readers: indexbuild.
package npy

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// HeaderBytes is the size of every header Header writes.
const HeaderBytes = 128

// Header returns a NumPy format 1.0 header for a C-order array of descr ("<f4" little-endian
// float32, "<i8" int64) and shape, always HeaderBytes long so that a placeholder can be
// overwritten once the shape is known. The data follows it.
func Header(descr string, shape ...int64) []byte {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = fmt.Sprint(d)
	}
	tuple := strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, tuple)
	h := make([]byte, HeaderBytes)
	copy(h, "\x93NUMPY\x01\x00")
	binary.LittleEndian.PutUint16(h[8:], uint16(HeaderBytes-10))
	n := copy(h[10:], dict)
	for i := 10 + n; i < HeaderBytes-1; i++ {
		h[i] = ' '
	}
	h[HeaderBytes-1] = '\n'
	return h
}
