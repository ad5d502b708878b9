package wire

import (
	"testing"

	"needle/testkit/weightstest"
)

// BenchmarkEncodeStep: a sender's step on a 64 MiB bf16 model at 1% changed, in 1 MiB chunks
// (bytes: both versions, as read), without and with the manifest hashed inside.
func BenchmarkEncodeStep(b *testing.B) {
	for _, f := range []Format{Compact, AstraFlow} {
		for _, hash := range []bool{false, true} {
			name := f.String()
			if hash {
				name += "/hashed"
			}
			b.Run(name, func(b *testing.B) {
				img, _ := weightstest.Image([]weightstest.Tensor{weightstest.T("w", "BF16", 8192, 4096)}, 1)
				cur := weightstest.Step(img, 0.01, 2)
				l, err := ChunkMapOf(img, DefaultChunk)
				if err != nil {
					b.Fatal(err)
				}
				var hashes []uint64
				if hash {
					hashes = make([]uint64, l.Chunks())
				}
				b.SetBytes(2 * int64(len(img)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := EncodeStep(Image{l, img}, Image{l, cur}, f, 1, hashes, func([]byte) error { return nil }); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
