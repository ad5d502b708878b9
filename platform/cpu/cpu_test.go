package cpu

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestParseLevel(t *testing.T) {
	for l := Ref; l <= Top; l++ {
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

func TestSelectEveryLevelTheCPURuns(t *testing.T) {
	if l, err := Select(""); err != nil || l != Supported() {
		t.Fatalf(`Select("") = %v, %v; want %v`, l, err, Supported())
	}
	for _, l := range Levels() {
		if got, err := Select(l.String()); err != nil || got != l {
			t.Errorf("Select(%q) = %v, %v", l.String(), got, err)
		}
		if m := Missing(l); len(m) != 0 {
			t.Errorf("Missing(%v) = %v for a level the CPU runs", l, m)
		}
	}
}

func TestSelectLevelTheCPULacks(t *testing.T) {
	if Supported() == Top {
		t.Skip("this CPU runs every level: none to ask for that it lacks")
	}
	for l := Supported() + 1; l <= Top; l++ {
		missing := Missing(l)
		if len(missing) == 0 {
			t.Fatalf("Missing(%v) is empty, but Supported() = %v", l, Supported())
		}
		_, err := Select(l.String())
		want := "NEEDLE_SIMD=" + l.String() + ": this CPU supports at most " + Supported().String()
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("Select(%q) error %v, want prefix %q", l.String(), err, want)
		}
		for _, f := range missing {
			if !strings.Contains(err.Error(), f) {
				t.Errorf("Select(%q) error %q does not name missing feature %s", l.String(), err, f)
			}
		}
	}
}

func TestSelectUnknownLevel(t *testing.T) {
	_, err := Select("sse9")
	if err == nil || err.Error() != `NEEDLE_SIMD: unknown SIMD level "sse9" (want ref, avx2, avx512, avx512vnni, avx512bf16 or amx)` {
		t.Fatalf(`Select("sse9") error %v`, err)
	}
}

// TestFeaturesCoverKernelTargets reads the target attributes and pragmas of every kernel source
// of a level (kernels/**/*_avx2.c, *_avx512.c, ...): each feature a kernel is compiled for must
// be one its level checks, or a CPU that lacks it would run the kernel and fault.
func TestFeaturesCoverKernelTargets(t *testing.T) {
	target := regexp.MustCompile(`target\("([^"]+)"\)`)
	for l := AVX2; l <= Top; l++ {
		var files []string
		err := filepath.WalkDir(filepath.Join("..", "..", "kernels"), func(path string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(path, "_"+l.String()+".c") {
				files = append(files, path)
			}
			return err
		})
		if err != nil || len(files) == 0 {
			t.Fatalf("no kernel sources of level %v (%v)", l, err)
		}
		checked := map[string]bool{}
		for _, f := range Features(l) {
			checked[f] = true
		}
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			ms := target.FindAllSubmatch(src, -1)
			if len(ms) == 0 {
				t.Errorf("%s has no target attribute or pragma", file)
			}
			for _, m := range ms {
				for _, f := range strings.Split(string(m[1]), ",") {
					if !checked[f] {
						t.Errorf("%s is compiled for %s, which level %v does not check (Features: %v)", file, f, l, Features(l))
					}
				}
			}
		}
	}
}

func TestFeaturesIncludeLowerLevels(t *testing.T) {
	if len(Features(Ref)) != 0 {
		t.Fatalf("Features(ref) = %v", Features(Ref))
	}
	for l := AVX2; l <= Top; l++ {
		lower, all := strings.Join(Features(l-1), ", "), strings.Join(Features(l), ", ")
		if len(Features(l)) <= len(Features(l-1)) || !strings.HasPrefix(all, lower) {
			t.Errorf("Features(%v) = %v does not extend Features(%v) = %v", l, all, l-1, lower)
		}
	}
}

func TestLevelsUpTo(t *testing.T) {
	got := LevelsUpTo(AVX512)
	if want := min(Supported(), AVX512) + 1; len(got) != int(want) || got[len(got)-1] != want-1 {
		t.Fatalf("LevelsUpTo(avx512) = %v on a CPU supporting %v", got, Supported())
	}
}

// FuzzSelect feeds any NEEDLE_SIMD value through cpu.c: a level the CPU runs, spelled exactly,
// or an error; never a crash or an empty message.
func FuzzSelect(f *testing.F) {
	for _, s := range []string{"", "ref", "avx2", "avx512", "avx512vnni", "avx512bf16", "amx", "AVX2", "avx2 ", strings.Repeat("x", 600)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := Select(s)
		switch {
		case err != nil:
			if err.Error() == "" || l != Ref {
				t.Fatalf("Select(%q) = %v, %q", s, l, err)
			}
		case s == "":
			if l != Supported() {
				t.Fatalf(`Select("") = %v, want %v`, l, Supported())
			}
		case l.String() != s || l > Supported():
			t.Fatalf("Select(%q) = %v", s, l)
		}
	})
}
