package examples

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"needle/platform/cpu"
	"needle/testkit/testenv"
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
	lib, py := libneedle(t), testenv.Python(t)
	wants := []string{"", "sse9"}
	for l := cpu.Ref; l <= cpu.Top; l++ {
		wants = append(wants, l.String())
	}
	for _, want := range wants {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSIMDLevelMatchesLibneedle$", "-test.v")
		cmd.Env = append(os.Environ(), "NEEDLE_SIMD_TEST_LIB="+lib, "NEEDLE_SIMD_TEST_PY="+py, "NEEDLE_SIMD="+want)
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

// simdLevelScript prints libneedle's needle_simd_level: its status, a newline, its text.
const simdLevelScript = `import ctypes, sys
buf = ctypes.create_string_buffer(512)
rc = ctypes.CDLL(sys.argv[1]).needle_simd_level(buf, ctypes.c_int64(len(buf)))
sys.stdout.write("%d\n%s" % (rc, buf.value.decode()))`

// compareWithLibneedle asks libneedle (through ctypes, in this process's environment) and Go's
// cpu.Selected for the level.
func compareWithLibneedle(t *testing.T, lib string) {
	out, err := exec.Command(os.Getenv("NEEDLE_SIMD_TEST_PY"), "-c", simdLevelScript, lib).Output()
	if err != nil {
		t.Fatalf("needle_simd_level through ctypes: %v", err)
	}
	rc, c, _ := strings.Cut(string(out), "\n")
	level, err := cpu.Selected()
	goSays := level.String()
	if err != nil {
		goSays = err.Error()
	}
	if (rc == "0") != (err == nil) || c != goSays {
		t.Fatalf("NEEDLE_SIMD=%q: libneedle says %q (rc %s), Go says %q", os.Getenv("NEEDLE_SIMD"), c, rc, goSays)
	}
	t.Logf("both say %q", c)
}
