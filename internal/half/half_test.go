package half

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestToFloat32AllValues: every binary16 against its value computed from its fields in float64.
func TestToFloat32AllValues(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		sign := 1.0
		if h&0x8000 != 0 {
			sign = -1
		}
		e, m := (h>>10)&0x1f, float64(h&0x3ff)
		var want float64
		switch {
		case e == 0x1f && m == 0:
			want = math.Inf(int(sign))
		case e == 0x1f:
			if !math.IsNaN(float64(ToFloat32(uint16(h)))) {
				t.Fatalf("half %#04x: want NaN", h)
			}
			continue
		case e == 0:
			want = sign * m * math.Pow(2, -24)
		default:
			want = sign * (1 + m/1024) * math.Pow(2, float64(e-15))
		}
		if got := ToFloat32(uint16(h)); float64(got) != want || math.Signbit(float64(got)) != (sign < 0) {
			t.Fatalf("half %#04x = %g, want %g", h, got, want)
		}
	}
}

// nearest is the oracle of FromFloat32 for finite f: the binary16 nearest to f, ties to the
// even mantissa, found by bisecting the ordered positive halves; 65520 and above round to inf.
func nearest(f float32) uint16 {
	a, sign := math.Abs(float64(f)), uint16(0)
	if math.Signbit(float64(f)) {
		sign = 0x8000
	}
	if a >= 65520 {
		return sign | 0x7c00
	}
	lo, hi := uint16(0), uint16(0x7bff) // value(lo) <= a < value(hi+1)
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if float64(ToFloat32(mid)) <= a {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo == 0x7bff {
		return sign | lo
	}
	below, above := a-float64(ToFloat32(lo)), float64(ToFloat32(lo+1))-a
	if above < below || (above == below && lo&1 == 1) {
		lo++
	}
	return sign | lo
}

// TestFromFloat32: every half and every midpoint between neighbours round as the bisection
// oracle says, and so do random floats of every exponent; NaN stays NaN, inf inf.
func TestFromFloat32(t *testing.T) {
	check := func(f float32) {
		if got, want := FromFloat32(f), nearest(f); got != want {
			t.Fatalf("FromFloat32(%g = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
	}
	for h := uint16(0); h < 0x7c00; h++ {
		v := ToFloat32(h)
		check(v)
		check(-v)
		mid := float32((float64(v) + float64(ToFloat32(h+1))) / 2) // exact: a half has 11 bits
		check(mid)
		check(math.Nextafter32(mid, 0))
		check(math.Nextafter32(mid, 1e9))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		f := math.Float32frombits(r.Uint32()&^0x7f800000 | uint32(r.IntN(0x90))<<23) // |f| < 2^17
		check(f)
	}
	if h := FromFloat32(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN -> %#04x, want a NaN", h)
	}
	if FromFloat32(float32(math.Inf(-1))) != 0xfc00 {
		t.Error("-inf is not -inf")
	}
}

// TestBF16: ties go to even, bits round-trip, NaN stays NaN.
func TestBF16(t *testing.T) {
	for _, c := range []struct {
		in   uint32
		want uint16
	}{
		{0x3f808000, 0x3f80}, {0x3f818000, 0x3f82}, {0x3f808001, 0x3f81}, {0x3f807fff, 0x3f80},
		{0x7f7fffff, 0x7f80}, {0x00000001, 0x0000}, {0x80000000, 0x8000}, {0x7f800001, 0x7fc0},
	} {
		if got := BF16FromFloat32(math.Float32frombits(c.in)); got != c.want {
			t.Errorf("BF16FromFloat32(%#08x) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
	for b := 0; b < 1<<16; b++ {
		f := BF16ToFloat32(uint16(b))
		if got := BF16FromFloat32(f); got != uint16(b) && !math.IsNaN(float64(f)) {
			t.Fatalf("bf16 %#04x -> %g -> %#04x", b, f, got)
		}
	}
	// Random finite floats: the nearer of the two bf16 neighbours, ties to the even one.
	r := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		f := math.Float32frombits(r.Uint32())
		if f != f || math.IsInf(float64(f), 0) || math.Abs(float64(f)) > 1e38 {
			continue
		}
		lo := uint16(math.Float32bits(f) >> 16)
		up := lo + 1
		dLo := math.Abs(float64(f) - float64(BF16ToFloat32(lo)))
		dUp := math.Abs(float64(f) - float64(BF16ToFloat32(up)))
		want := lo
		if dUp < dLo || (dUp == dLo && up&1 == 0) {
			want = up
		}
		if got := BF16FromFloat32(f); got != want {
			t.Fatalf("BF16FromFloat32(%g) = %#x, want %#x", f, got, want)
		}
	}
}

// TestRoundTrip: float32 -> binary16 -> float32 on hand-picked values: ties to even,
// subnormals, overflow to infinity.
func TestRoundTrip(t *testing.T) {
	for _, c := range []struct{ in, want float32 }{
		{1 + 1.0/2048, 1}, {1 + 3.0/2048, 1 + 4.0/2048}, {0.1, 0.0999755859375}, {-2.5e-8, 0},
		{3e-8, 5.960464477539063e-08}, {65519, 65504}, {65520, float32(math.Inf(1))}, {-1e6, float32(math.Inf(-1))},
		{6.1e-5, 6.097555160522461e-05},
	} {
		if got := ToFloat32(FromFloat32(c.in)); got != c.want {
			t.Errorf("ToFloat32(FromFloat32(%g)) = %g, want %g", c.in, got, c.want)
		}
	}
}
