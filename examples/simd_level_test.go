package examples

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ebitengine/purego"

	"needle/platform/cpu"
)

// TestSIMDLevelMatchesLibneedle checks that libneedle.so's needle_simd_level and Go's
// cpu.Selected agree on the level, or on the error, for NEEDLE_SIMD unset, each level this CPU
// runs, each it lacks, and an unknown one. Both read NEEDLE_SIMD once per process, so each value
// runs in a child process of this test.
func TestSIMDLevelMatchesLibneedle(t *testing.T) {
	if lib := os.Getenv("NEEDLE_SIMD_TEST_LIB"); lib != "" {
		compareWithLibneedle(t, lib)
		return
	}
	lib := libneedle(t)
	wants := []string{"", "sse9"}
	for l := cpu.Ref; l <= cpu.Top; l++ {
		wants = append(wants, l.String())
	}
	for _, want := range wants {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSIMDLevelMatchesLibneedle$", "-test.v")
		cmd.Env = append(os.Environ(), "NEEDLE_SIMD_TEST_LIB="+lib, "NEEDLE_SIMD="+want)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS") {
			t.Errorf("NEEDLE_SIMD=%q: %v\n%s", want, err, out)
			continue
		}
		if i := strings.Index(string(out), "both say"); i >= 0 {
			t.Logf("NEEDLE_SIMD=%q: %s", want, strings.SplitN(string(out)[i:], "\n", 2)[0])
		}
	}
}

func compareWithLibneedle(t *testing.T, lib string) {
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Fatal(err)
	}
	var simdLevel func(buf *byte, n int64) int32
	purego.RegisterLibFunc(&simdLevel, h, "needle_simd_level")
	buf := make([]byte, 512)
	rc := simdLevel(&buf[0], int64(len(buf)))
	c := string(buf[:strings.IndexByte(string(buf), 0)])
	level, err := cpu.Selected()
	goSays := level.String()
	if err != nil {
		goSays = err.Error()
	}
	if (rc == 0) != (err == nil) || c != goSays {
		t.Fatalf("NEEDLE_SIMD=%q: libneedle says %q (rc %d), Go says %q", os.Getenv("NEEDLE_SIMD"), c, rc, goSays)
	}
	t.Logf("both say %q", c)
}
