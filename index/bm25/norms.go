package bm25

import "math/bits"

// Lucene stores a document's length (its count of indexed terms) in one byte,
// SmallFloat.intToByte4: exact below numFreeValues, then 4 significant bits. BM25 scores use
// the decoded length, so needle encodes and decodes lengths the same way.
const numFreeValues = 255 - 231 // 255 - longToInt4(MaxInt32)

// lengthToByte is SmallFloat.intToByte4.
func lengthToByte(n uint32) byte {
	if n < numFreeValues {
		return byte(n)
	}
	return byte(numFreeValues + longToInt4(uint64(n-numFreeValues)))
}

// byteToLength is SmallFloat.byte4ToInt.
func byteToLength(b byte) uint32 {
	if b < numFreeValues {
		return uint32(b)
	}
	return uint32(numFreeValues + int4ToLong(uint32(b)-numFreeValues))
}

// longToInt4 keeps the 4 most significant bits of i (the first implicit) and the shift.
func longToInt4(i uint64) uint32 {
	n := bits.Len64(i)
	if n < 4 {
		return uint32(i)
	}
	shift := n - 4
	return uint32(i>>shift)&0x07 | uint32(shift+1)<<3
}

func int4ToLong(i uint32) uint64 {
	b := uint64(i & 0x07)
	shift := int(i>>3) - 1
	if shift == -1 {
		return b
	}
	return (b | 0x08) << shift
}
