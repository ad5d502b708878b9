package delta

import (
	"bytes"
	"fmt"
	"testing"

	"needle/platform/cpu"
	"needle/platform/membw"
	"needle/safetensors/synth"
	"needle/testkit/weightstest"
)

// benchFractions are the changed shares of one RL step (ANCHORS.md §6).
var benchFractions = []float64{0.005, 0.01, 0.02}

// readBandwidth is the 1-thread read bandwidth (bytes/s) of a 256 MiB buffer, measured in
// the same run as the benchmark that reports a share of it.
func readBandwidth(b *testing.B) float64 {
	buf, err := membw.NewBuffer(256 << 20)
	if err != nil {
		b.Fatal(err)
	}
	return buf.Bandwidth(1, 5)
}

// BenchmarkEncode: bytes/s counts both inputs (2 x tensor), the bytes encode reads; the
// "of-read" metric is that rate over the read bandwidth measured just before (the goal is 0.7).
func BenchmarkEncode(b *testing.B) {
	for _, frac := range benchFractions {
		oldBits, newBits := weightstest.Pair(32<<20, 2, frac, 1)
		read := readBandwidth(b)
		for _, l := range cpu.LevelsUpTo(cpu.AVX512) {
			b.Run(fmt.Sprintf("bf16-%.1fpct-%s", 100*frac, l), func(b *testing.B) {
				var s Sparse
				// Once before timing: the output buffers' first touch (page faults) is not encode.
				if err := encode(l, &s, oldBits, newBits, 2, 1); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(2 * len(oldBits)))
				b.ReportAllocs()
				for b.Loop() {
					if err := encode(l, &s, oldBits, newBits, 2, 1); err != nil {
						b.Fatal(err)
					}
				}
				rate := float64(2*len(oldBits)) * float64(b.N) / b.Elapsed().Seconds()
				b.ReportMetric(rate/read, "of-read")
			})
		}
	}
}

// BenchmarkApply: bytes/s counts the tensor the delta is applied to.
func BenchmarkApply(b *testing.B) {
	for _, frac := range benchFractions {
		oldBits, newBits := weightstest.Pair(32<<20, 2, frac, 1)
		var s Sparse
		if err := Encode(&s, oldBits, newBits, 2, 1); err != nil {
			b.Fatal(err)
		}
		base := make([]byte, len(oldBits))
		b.Run(fmt.Sprintf("bf16-%.1fpct", 100*frac), func(b *testing.B) {
			b.SetBytes(int64(len(base)))
			b.ReportAllocs()
			for b.Loop() {
				if err := Apply(base, &s, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodePacked: 1 MiB chunks of bf16 after an optimizer's step that changes 1% of
// them (0.7% of those in their high byte), each compared ("scan") and then, while it is in
// cache, also turned into a packed record's payload ("payload": the gaps at the width of the
// shortest stream, the low plane, the exceptions), as weights/wire encodes a step. Bytes/s
// counts both versions.
func BenchmarkEncodePacked(b *testing.B) {
	const chunk = 1 << 20
	img, _ := synth.Image([]synth.Tensor{synth.T("w", "BF16", 8192, 4096)}, 1)
	oldBits, newBits := bytes.Clone(img), bytes.Clone(img)
	o := synth.Calibrated(3, 0.01)
	o.Version(oldBits, 0, 2)
	o.Version(newBits, 1, 2)
	oldBits, newBits = oldBits[len(img)-64*chunk:], newBits[len(img)-64*chunk:] // the tensor
	for _, payload := range []bool{false, true} {
		b.Run(map[bool]string{false: "scan", true: "payload"}[payload], func(b *testing.B) {
			var s Sparse
			var out []byte
			b.SetBytes(2 * int64(len(oldBits)))
			for b.Loop() {
				for c := 0; c < len(oldBits); c += chunk {
					ob := oldBits[c : c+chunk]
					if err := Encode(&s, ob, newBits[c:c+chunk], 2, 1); err != nil {
						b.Fatal(err)
					}
					if !payload {
						continue
					}
					var err error
					if out, _, err = AppendPackedPayload(out[:0], &s, ob, 0, 1, true); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
