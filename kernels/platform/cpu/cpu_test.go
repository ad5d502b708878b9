package cpu

import "testing"

func TestParseLevel(t *testing.T) {
	for _, l := range []Level{Ref, AVX2, AVX512} {
		got, err := ParseLevel(l.String())
		if err != nil || got != l {
			t.Fatalf("ParseLevel(%q) = %v, %v", l.String(), got, err)
		}
	}
	if _, err := ParseLevel("sse9"); err == nil {
		t.Fatal("ParseLevel accepted sse9")
	}
}

func TestLevelsStartAtRef(t *testing.T) {
	ls := Levels()
	if len(ls) == 0 || ls[0] != Ref || ls[len(ls)-1] != Supported() {
		t.Fatalf("Levels() = %v, Supported() = %v", ls, Supported())
	}
}
