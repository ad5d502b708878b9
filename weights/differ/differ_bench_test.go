package differ

import (
	"testing"

	"needle/kernels/trainer/delta"
	"needle/testkit/weightstest"
	"needle/weights/layout"
	"needle/weights/store"
)

// BenchmarkRun: the sender's job on a 64 MiB bf16 model at 1% changed, in 1 MiB chunks (bytes:
// both versions, as read).
func BenchmarkRun(b *testing.B) {
	for _, f := range []delta.Format{delta.Compact, delta.AstraFlow} {
		b.Run(f.String(), func(b *testing.B) {
			img, _ := weightstest.Image([]weightstest.Tensor{weightstest.T("w", "BF16", 8192, 4096)}, 1)
			cur := weightstest.Step(img, 0.01, 2)
			o, c := snap(b, img, 1), snap(b, cur, 2)
			o.Layout, _ = layout.New(o.Layout.Header, o.Layout.Size, layout.DefaultChunk)
			c.Layout = o.Layout
			b.SetBytes(2 * int64(len(img)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Run(o, c, store.NewStep(1, 2, c.Layout), f, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
