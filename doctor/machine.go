package doctor

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"needle/faissgo"
	"needle/platform/blascore"
	"needle/platform/cpu"
)

// blasNote is what every BLAS line says about who uses it.
const blasNote = "only FAISS calls BLAS (index training and searches of the faiss backend); needle's encoder, flat scan and logprob kernels do not"

// machine checks the CPU, the SIMD level, BLAS, FAISS, threads and memory.
func machine() []Check {
	info := readCPUInfo("/proc/cpuinfo")
	out := []Check{{Name: "cpu", Status: OK, Value: fmt.Sprintf("%s (%s family %d model %d), %d logical cores", info.model, info.vendor, info.family, info.modelNumber, runtime.NumCPU()),
		Why: "best SIMD level it runs: " + cpu.Supported().String() + " (" + strings.Join(cpu.Features(cpu.Supported()), ", ") + ")"}}
	out = append(out, simd())
	out = append(out, blas(info), faiss())
	out = append(out, threads(), memory("/proc/meminfo"))
	return out
}

// faiss is the FAISS release linked into this binary and how it was compiled, as the library
// itself says.
func faiss() Check {
	opts := faissgo.CompileOptions()
	c := Check{Name: "faiss", Status: OK, Value: fmt.Sprintf("FAISS %s (%s), linked statically", faissgo.Version(), opts)}
	if strings.Contains(opts, "GENERIC") {
		c.Why = "built for any x86-64: FAISS's own loops (HNSW, SQ and PQ distances) without AVX2; its BLAS calls (flat and IVF distances) run OpenBLAS's kernels for this CPU (blas)"
	}
	return c
}

// simd is the level kernels use (cpu.Selected) and why.
func simd() Check {
	want := os.Getenv("NEEDLE_SIMD")
	l, err := cpu.Selected()
	switch {
	case err != nil:
		return Check{Name: "simd", Status: Missing, Value: "NEEDLE_SIMD=" + want, Why: err.Error()}
	case want == "":
		return Check{Name: "simd", Status: OK, Value: l.String(), Why: "the best this CPU runs (NEEDLE_SIMD unset)"}
	case l < cpu.Supported():
		return Check{Name: "simd", Status: Warn, Value: l.String(), Why: "forced by NEEDLE_SIMD=" + want + "; this CPU runs " + cpu.Supported().String()}
	}
	return Check{Name: "simd", Status: OK, Value: l.String(), Why: "NEEDLE_SIMD=" + want}
}

// blas is OpenBLAS's version, kernel set and how it was chosen, with the known-bad
// combinations.
func blas(info cpuInfo) Check {
	config, core := blascore.Config(), blascore.Name()
	c := Check{Name: "blas", Status: OK, Value: fmt.Sprintf("%s; kernels %s", config, core)}
	why := "chosen by OpenBLAS from the CPU model"
	if env := os.Getenv("OPENBLAS_CORETYPE"); env != "" {
		why = "chosen by OPENBLAS_CORETYPE=" + env
	}
	switch {
	case core == "Prescott" && cpu.Supported() >= cpu.AVX2:
		c.Status, why = Warn, why+"; Prescott is OpenBLAS's SSE3 fallback, several times slower on this AVX2 CPU: unset OPENBLAS_CORETYPE (needle then picks Haswell or SkylakeX)"
	case zen5(info) && versionBefore(config, 0, 3, 29):
		c.Status, why = Warn, why+"; this OpenBLAS predates Zen 5 detection (0.3.29, OpenBLAS PR #4923) and runs the kernels its features suggest: set OPENBLAS_CORETYPE=SkylakeX on an AVX-512 Zen 5 if FAISS searches are slow"
	}
	c.Why = why + "; " + blasNote
	return c
}

// zen5 is an AMD CPU of family 0x1A (Zen 5).
func zen5(info cpuInfo) bool { return info.vendor == "AuthenticAMD" && info.family == 0x1A }

// versionBefore says whether OpenBLAS's config line ("OpenBLAS 0.3.21 ...") names a version
// older than major.minor.patch; false when it names none.
func versionBefore(config string, major, minor, patch int) bool {
	f := strings.Fields(config)
	if len(f) < 2 || f[0] != "OpenBLAS" {
		return false
	}
	var v [3]int
	for i, part := range strings.SplitN(f[1], ".", 3) {
		n, err := strconv.Atoi(strings.TrimRightFunc(part, func(r rune) bool { return r < '0' || r > '9' }))
		if err != nil {
			return false
		}
		v[i] = n
	}
	for i, want := range [3]int{major, minor, patch} {
		if v[i] != want {
			return v[i] < want
		}
	}
	return false
}

// threads are the thread counts the encoder, FAISS and Go use.
func threads() Check {
	var env []string
	for _, name := range []string{"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOMAXPROCS"} {
		if v := os.Getenv(name); v != "" {
			env = append(env, name+"="+v)
		}
	}
	why := "no thread variables set: --threads 0 means all cores"
	if len(env) > 0 {
		why = "set: " + strings.Join(env, " ")
	}
	return Check{Name: "threads", Status: OK, Value: fmt.Sprintf("%d cores, Go %d, OpenBLAS %d", runtime.NumCPU(), runtime.GOMAXPROCS(0), blascore.Threads()), Why: why}
}

// memory is the machine's total and available memory (/proc/meminfo).
func memory(path string) Check {
	kb := readKB(path, "MemTotal", "MemAvailable")
	if kb["MemTotal"] == 0 {
		return Check{Name: "memory", Status: Warn, Value: "unknown", Why: "cannot read " + path}
	}
	return Check{Name: "memory", Status: OK, Value: fmt.Sprintf("%.1f GiB, %.1f GiB available", gib(kb["MemTotal"]), gib(kb["MemAvailable"])),
		Why: "the faiss backend holds the whole index in RAM; the mapped backend (flat files) only the pages it reads"}
}

func gib(kb int64) float64 { return float64(kb) / (1 << 20) }

// readKB reads "Name: N kB" fields of a /proc file.
func readKB(path string, names ...string) map[string]int64 {
	out := map[string]int64{}
	b, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		for _, n := range names {
			if name == n {
				out[n], _ = strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			}
		}
	}
	return out
}

// cpuInfo is the first processor of /proc/cpuinfo.
type cpuInfo struct {
	model, vendor       string
	family, modelNumber int
}

func readCPUInfo(path string) cpuInfo {
	info := cpuInfo{model: "unknown CPU", vendor: "unknown vendor"}
	b, _ := os.ReadFile(path)
	first, _, _ := strings.Cut(string(b), "\n\n")
	for _, line := range strings.Split(first, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "model name":
			info.model = v
		case "vendor_id":
			info.vendor = v
		case "cpu family":
			info.family, _ = strconv.Atoi(v)
		case "model":
			info.modelNumber, _ = strconv.Atoi(v)
		}
	}
	return info
}
