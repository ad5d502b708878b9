// Package byteview converts between float32 slices and the little-endian bytes of FAISS
// files, memmaps, safetensors and wire buffers: the one place that knows every CPU needle
// runs on (x86-64, arm64) stores floats little-endian.
package byteview

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// Float32s is x's memory as bytes (no copy): writes through either show in both.
func Float32s(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

// ReadFloat32s copies the len(dst) little-endian float32s at the start of b (any alignment:
// a mapped file's rows may start at any byte) into dst.
func ReadFloat32s(dst []float32, b []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}
