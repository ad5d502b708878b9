package wire

import (
	"bytes"
	"fmt"
	"testing"

	"needle/bench/synth"
)

// BenchmarkEncodeStep: a sender's step on a 64 MiB bf16 model in 1 MiB chunks (bytes: both
// versions, as read), without and with the manifest hashed inside. The step changes 1% of the
// elements in their lowest bits ("lowbits"), or is an optimizer's step from an fp32 master that
// changes 1% or 2.4% of them, some in their high byte ("adam"). One thread, and two ("threads2":
// how the step's work spreads over goroutines).
func BenchmarkEncodeStep(b *testing.B) {
	img, _ := synth.Image([]synth.Tensor{synth.T("w", "BF16", 8192, 4096)}, 1)
	type step struct {
		name     string
		old, cur []byte
	}
	steps := []step{{"lowbits1%", img, synth.Step(img, 0.01, 2)}}
	for _, s := range []struct {
		name string
		frac float64
	}{{"adam1%", 0.01}, {"adam2.4%", 0.024}} {
		o := synth.Calibrated(3, s.frac)
		old, cur := bytes.Clone(img), bytes.Clone(img)
		o.Version(old, 0, 2)
		o.Version(cur, 1, 2)
		steps = append(steps, step{s.name, old, cur})
	}
	l, err := ChunkMapOf(img, DefaultChunk)
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range []Format{Packed, AstraFlow} {
		for _, s := range steps {
			for _, v := range []struct {
				hash    bool
				threads int
			}{{false, 1}, {true, 1}, {false, 2}} {
				name := f.String() + "/" + s.name
				if v.hash {
					name += "/hashed"
				}
				if v.threads > 1 {
					name += fmt.Sprintf("/threads%d", v.threads)
				}
				b.Run(name, func(b *testing.B) {
					var hashes []uint64
					if v.hash {
						hashes = make([]uint64, l.Chunks())
					}
					b.SetBytes(2 * int64(len(img)))
					b.ReportAllocs()
					for b.Loop() {
						if _, err := EncodeStep(Image{l, s.old}, Image{l, s.cur}, f, v.threads, hashes, func([]byte) error { return nil }); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
