package synth

import (
	"math"
	"sync"
)

// Optimizer makes the versions of a model that a trainer publishes: each BF16 element has an
// fp32 master weight (a triangular distribution of scale 0.02, as Fill) that every step moves by
// LR times a per-element Adam-like update (|m/sqrt(v)| spread over [0, 1), the sign fixed per
// element); version k is the master after k steps rounded to bf16 (nearest, ties to even, as
// torch's .to(torch.bfloat16)). Most steps leave an element's bf16 bits alone; those that change
// usually change the low mantissa bits, and an element near a power of two or zero changes its
// high byte (exponent or sign), as ANCHORS.md describes real steps. Master and update are
// functions of (Seed, element number), so no fp32 copy is held: a version of a multi-GB model is
// written in place, in parallel.
type Optimizer struct {
	Seed uint64
	LR   float32
}

// Version writes version k into the BF16 tensors of img (a whole file, header in place) on
// threads goroutines; other tensors are left as they are.
func (o Optimizer) Version(img []byte, k int, threads int) {
	hdr, tensors := parse(img)
	data := img[hdr:]
	type span struct{ begin, end int64 }
	var spans []span
	const piece = 1 << 22 // bytes per job: even, so elements never straddle two jobs
	for _, t := range tensors {
		if t.DType != "BF16" {
			continue
		}
		for b := t.Begin; b < t.End; b += piece {
			spans = append(spans, span{b, min(b+piece, t.End)})
		}
	}
	jobs := make(chan span)
	var wg sync.WaitGroup
	for range max(threads, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range jobs {
				for b := s.begin; b+2 <= s.end; b += 2 {
					v := toBF16(o.weight(uint64(b/2), k))
					data[b], data[b+1] = byte(v), byte(v>>8)
				}
			}
		}()
	}
	for _, s := range spans {
		jobs <- s
	}
	close(jobs)
	wg.Wait()
}

// weight is element i's fp32 master after k steps. One hash per element: bits 0-23 and 40-63
// make the master, bits 24-38 the update's size, bit 39 its sign.
func (o Optimizer) weight(i uint64, k int) float32 {
	const unit24, unit15 = 1.0 / (1 << 24), 1.0 / (1 << 15)
	h := mix(o.Seed ^ (i * 0x9e3779b97f4a7c15))
	w := (float32(h>>40)*unit24 + float32(h&(1<<24-1))*unit24 - 1) * 0.04
	u := float32(h>>24&(1<<15-1)) * unit15 // |m/sqrt(v)|
	if h>>39&1 == 1 {
		u = -u
	}
	return w - float32(k)*o.LR*u
}

// Changed returns the fraction of elements whose bf16 bits differ between versions k and k+1,
// and the fraction of those whose high byte differs, over n elements.
func (o Optimizer) Changed(k int, n uint64) (changed, highByte float64) {
	var c, h int
	for i := range n {
		a, b := toBF16(o.weight(i, k)), toBF16(o.weight(i, k+1))
		if a != b {
			c++
			if a>>8 != b>>8 {
				h++
			}
		}
	}
	return float64(c) / float64(n), float64(h) / float64(max(c, 1))
}

// Calibrated returns an Optimizer with the LR at which about frac of the elements change per
// step (measured on a million elements; the fraction grows linearly with small rates).
func Calibrated(seed uint64, frac float64) Optimizer {
	o := Optimizer{Seed: seed, LR: 1e-6}
	for range 3 {
		c, _ := o.Changed(0, 1<<20)
		o.LR = float32(float64(o.LR) * frac / max(c, 1e-9))
	}
	return o
}

// toBF16 rounds f to bf16 bits, to nearest with ties to even (f finite).
func toBF16(f float32) uint16 {
	b := math.Float32bits(f)
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// mix is splitmix64's finalizer: a counter-based stream (any element computed alone).
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
