package doctor

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"needle/cuda"
	"needle/testkit/testenv"
)

func TestVersionBefore(t *testing.T) {
	for _, c := range []struct {
		config string
		want   bool
	}{
		{"OpenBLAS 0.3.21 DYNAMIC_ARCH Zen", true}, {"OpenBLAS 0.3.29 DYNAMIC_ARCH", false}, {"OpenBLAS 0.3.30.dev", false},
		{"OpenBLAS 0.4", false}, {"OpenBLAS 0.3.28", true}, {"OpenBLAS x.y", false}, {"MKL 2024", false}, {"", false},
	} {
		if got := versionBefore(c.config, 0, 3, 29); got != c.want {
			t.Errorf("versionBefore(%q) = %v, want %v", c.config, got, c.want)
		}
	}
}

func FuzzVersionBefore(f *testing.F) {
	for _, s := range []string{"OpenBLAS 0.3.21 Zen", "OpenBLAS ...", "OpenBLAS 1.2.3.4.5", "OpenBLAS -1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, config string) { versionBefore(config, 0, 3, 29) })
}

func TestProcFiles(t *testing.T) {
	dir := t.TempDir()
	cpuinfo := filepath.Join(dir, "cpuinfo")
	os.WriteFile(cpuinfo, []byte("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 68\nmodel name\t: AMD EPYC 9005\n\nprocessor\t: 1\nmodel name\t: other\n"), 0o644)
	info := readCPUInfo(cpuinfo)
	if info != (cpuInfo{model: "AMD EPYC 9005", vendor: "AuthenticAMD", family: 26, modelNumber: 68}) || !zen5(info) {
		t.Errorf("readCPUInfo: %+v", info)
	}
	meminfo := filepath.Join(dir, "meminfo")
	os.WriteFile(meminfo, []byte("MemTotal:       25165824 kB\nMemFree:  1 kB\nMemAvailable:   12582912 kB\n"), 0o644)
	if c := memory(meminfo); c.Status != OK || c.Value != "24.0 GiB, 12.0 GiB available" {
		t.Errorf("memory: %+v", c)
	}
	if c := memory(filepath.Join(dir, "none")); c.Status != Warn {
		t.Errorf("memory of no file: %+v", c)
	}
}

// TestRun: the machine checks (and the Milvus line) always run; an index that does not exist fails the report,
// in text and JSON.
func TestRun(t *testing.T) {
	r := Run(Options{})
	names := map[string]bool{}
	for _, c := range r.Checks {
		names[c.Name] = true
	}
	for _, want := range []string{"cpu", "simd", "blas", "faiss", "threads", "memory", "milvus"} {
		if !names[want] {
			t.Errorf("no %s check in %+v", want, r.Checks)
		}
	}
	for _, c := range r.Checks {
		if c.Name == "faiss" && !strings.HasPrefix(c.Value, "FAISS 1.12.0 (OPTIMIZE GENERIC)") {
			t.Errorf("faiss check says %q, want the linked FAISS 1.12.0 (tools/faiss.sh)", c.Value)
		}
	}
	bad := Run(Options{Index: filepath.Join(t.TempDir(), "missing")})
	if !bad.Failed() {
		t.Fatalf("a missing index did not fail: %+v", bad.Checks)
	}
	var text, js bytes.Buffer
	if err := bad.WriteText(&text); err != nil || !strings.Contains(text.String(), "[missing] index") {
		t.Errorf("text: %v\n%s", err, text.String())
	}
	var decoded struct {
		Failed bool
		Checks []Check
	}
	if err := bad.WriteJSON(&js); err != nil || json.Unmarshal(js.Bytes(), &decoded) != nil || !decoded.Failed || len(decoded.Checks) != len(bad.Checks) {
		t.Errorf("json: %v %s", err, js.String())
	}
}

// TestModel loads the real MiniLM as serve would.
func TestModel(t *testing.T) {
	r := Run(Options{Model: testenv.MiniLMDir(t)})
	last := r.Checks[len(r.Checks)-1]
	if last.Name != "model" || last.Status != OK || !strings.Contains(last.Value, "dimension 384, fp16") || r.Failed() {
		t.Errorf("model check %+v (report failed: %v)", last, r.Failed())
	}
}

// TestGPUNeeded: without a usable GPU, --gpu fails the report; without --gpu it is information.
func TestGPUNeeded(t *testing.T) {
	if n, err := cuda.Count(); err == nil && n > 0 {
		t.Skip("this machine has a GPU")
	}
	for _, needed := range []bool{false, true} {
		c := gpu(needed)[0]
		if want := map[bool]string{false: Info, true: Missing}[needed]; c.Status != want || c.Why == "" {
			t.Errorf("gpu(%v) = %+v, want status %s with the reason", needed, c, want)
		}
	}
}
