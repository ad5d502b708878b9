package logprob

import (
	"encoding/binary"
	"math"
	"testing"

	"needle/platform/cpu"
)

// FuzzLevelsAgree feeds arbitrary bit patterns (NaN, +-inf, subnormals, huge values) as bf16,
// f16 or f32 logits and checks every SIMD level against the scalar reference: same NaN rows,
// same infinities, values to 1e-5 relative (close); and that nothing crashes. A float64 oracle cannot
// follow fp32 overflow on such inputs, so the scalar C reference is the oracle here.
func FuzzLevelsAgree(f *testing.F) {
	f.Add([]byte{0x80, 0x3f, 0x00, 0x40, 0x80, 0x7f, 0xc0, 0x7f}, uint8(2), uint8(2), uint8(0), uint8(1))
	f.Add([]byte{0x80, 0xff, 0x80, 0xff, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0}, uint8(3), uint8(2), uint8(5), uint8(2))
	f.Add(make([]byte, 200), uint8(25), uint8(0), uint8(3), uint8(0))
	seed := make([]byte, 4*70)
	for i := 0; i < 70; i++ {
		binary.LittleEndian.PutUint32(seed[4*i:], math.Float32bits(float32(i%13)-6+float32(i)*1e36))
	}
	f.Add(seed, uint8(35), uint8(0), uint8(9), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, vocab, dtypeSel, label, tempSel uint8) {
		dtype := []DType{F32, F16, BF16}[int(dtypeSel)%3]
		v := int(vocab)%80 + 1
		rows := len(data) / (v * dtype.Size())
		x := Logits{DType: dtype, Rows: rows, Vocab: v, Data: data[:rows*v*dtype.Size()]}
		labels := make([]int64, rows)
		for i := range labels {
			labels[i] = int64((int(label) + i) % v)
			if i%3 == 2 {
				labels[i] = DefaultIgnoreIndex
			}
		}
		opt := DefaultOptions()
		opt.Temperature = []float32{1, 0.5, 2, 1e-3}[int(tempSel)%4]
		want := newOutput(rows)
		if err := ComputeAt(cpu.Ref, x, labels, opt, want); err != nil {
			t.Fatal(err)
		}
		for _, level := range cpu.LevelsUpTo(cpu.AVX512)[1:] {
			got := newOutput(rows)
			if err := ComputeAt(level, x, labels, opt, got); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < rows; i++ {
				for k, pair := range [][2]float32{{got.Logprob[i], want.Logprob[i]}, {got.Entropy[i], want.Entropy[i]}, {got.LSE[i], want.LSE[i]}} {
					if !close(pair[0], float64(pair[1])) {
						t.Fatalf("%v %v row %d output %d: %v, reference %v", level, dtype, i, k, pair[0], pair[1])
					}
				}
			}
		}
	})
}
