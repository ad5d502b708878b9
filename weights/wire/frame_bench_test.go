package wire

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// BenchmarkFrameCheck: the check of a 1 MiB raw record's frame, as the sender makes it
// (PutHeader over the record header and the chunk in place) and as a receiver verifies it;
// "xxh64" is protocol 1's check over the same bytes, for the ratio.
func BenchmarkFrameCheck(b *testing.B) {
	chunk := bytes.Repeat([]byte("bf16 weights"), 1<<20/12)
	rh := AppendRecordHeader(nil, 7, OpRaw, 0)
	frame := AppendFrame(nil, KindRecord, append(bytes.Clone(rh), chunk...))
	var h [HeaderLen]byte
	b.Run("put", func(b *testing.B) {
		b.SetBytes(int64(len(chunk)))
		for range b.N {
			PutHeader(h[:], KindRecord, rh, chunk)
		}
	})
	b.Run("verify", func(b *testing.B) {
		f, _, err := ReadUnchecked(bufio.NewReader(bytes.NewReader(frame)), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(chunk)))
		for range b.N {
			if err := f.Check(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("xxh64", func(b *testing.B) {
		b.SetBytes(int64(len(chunk)))
		for range b.N {
			d := xxhash.New()
			d.Write(frame[:8])
			d.Write(frame[HeaderLen:])
			d.Sum64()
		}
	})
}
