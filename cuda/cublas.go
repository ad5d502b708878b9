package cuda

// cuBLAS, opened at run time like the driver (by the host core, nl_cublas_open; where to look is
// decided here). Most GPU machines have it only as a pip package
// of a Python environment, in one of two layouts: CUDA 13 wheels (nvidia-cublas 13.x, what torch
// +cu130 pulls in) put libcublas.so.13 in site-packages/nvidia/cu13/lib, CUDA 12 wheels
// (nvidia-cublas-cu12) put libcublas.so.12 in site-packages/nvidia/cublas/lib. So besides an
// explicit path, CUDA_HOME, the loader path and /usr/local/cuda, it is looked for in both layouts
// of every Python environment a user may have: the one this binary was installed into (the
// needle_rl wheel), VIRTUAL_ENV, CONDA_PREFIX, those of every python3 on PATH, ~/.local, and the system's /usr/local and /usr (root's pip installs into
// /usr/local/lib/python3.X/dist-packages on Debian and Ubuntu, site-packages elsewhere).
// Python itself is never run: the places are found from the environment and the file system.

/*
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"
)

// CublasEnv names the environment variable with the cuBLAS library's path; when set, it is
// the only place tried.
const CublasEnv = "NEEDLE_CUBLAS"

// cublasSonames are the cuBLAS versions needle calls (the GemmEx ABI of CUDA 12 and 13), newest first.
var cublasSonames = []string{"libcublas.so.13", "libcublas.so.12"}

// cublasWheelDirs are the folders under site-packages (or dist-packages) where the CUDA 13
// and the CUDA 12 wheels put cuBLAS.
var cublasWheelDirs = []string{"nvidia/cu13/lib", "nvidia/cublas/lib"}

// cublasSearch lists, in search order, the files (absolute paths) and loader names (bare
// sonames, resolved by dlopen through LD_LIBRARY_PATH and ld.so.cache) to try, and the places
// they come from in words (for the error when none loads). getenv reads the environment and
// home is the user's home folder ("" to skip ~/.local). In each place .so.13 comes before .so.12.
func cublasSearch(getenv func(string) string, home string) (cands, places []string) {
	if p := getenv(CublasEnv); p != "" {
		return []string{p}, []string{CublasEnv + "=" + p}
	}
	seen := map[string]bool{}
	add := func(paths ...string) {
		for _, p := range paths {
			if !seen[p] {
				seen[p] = true
				cands = append(cands, p)
			}
		}
	}
	inDirs := func(dirs ...string) {
		for _, so := range cublasSonames {
			for _, d := range dirs {
				add(filepath.Join(d, so))
			}
		}
	}
	if h := getenv("CUDA_HOME"); h != "" {
		inDirs(filepath.Join(h, "lib64"), filepath.Join(h, "lib"))
		places = append(places, "CUDA_HOME="+h)
	}
	add(cublasSonames...)
	places = append(places, fmt.Sprintf("the loader path (LD_LIBRARY_PATH=%q, ld.so.cache)", getenv("LD_LIBRARY_PATH")))
	inDirs("/usr/local/cuda/lib64")
	places = append(places, "/usr/local/cuda/lib64")
	prefixes := pythonPrefixes(getenv, home)
	for _, prefix := range prefixes {
		for _, so := range cublasSonames {
			for _, pkgs := range []string{"site-packages", "dist-packages"} {
				for _, dir := range cublasWheelDirs {
					matches, _ := filepath.Glob(filepath.Join(prefix, "lib", "python3*", pkgs, dir, so))
					add(matches...)
				}
			}
		}
	}
	places = append(places, fmt.Sprintf("{%s}/lib/python3*/{site,dist}-packages/{%s}",
		strings.Join(prefixes, ","), strings.Join(cublasWheelDirs, ",")))
	return cands, places
}

// pythonPrefixes are the install prefixes of the user's Python environments, in search
// order: the environment this binary was installed into by pip (installPrefix), VIRTUAL_ENV, CONDA_PREFIX, the prefix of each python3 on PATH (the folder above its
// bin/, before and after resolving links), ~/.local (pip install --user), then /usr/local and
// /usr (the system's pip, whichever python3 is on PATH), each once.
func pythonPrefixes(getenv func(string) string, home string) []string {
	var prefixes []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			prefixes = append(prefixes, p)
		}
	}
	if exe, err := executable(); err == nil {
		if p := installPrefix(exe); p != "" {
			add(p)
		}
	}
	for _, v := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if p := getenv(v); p != "" {
			add(p)
		}
	}
	for _, dir := range filepath.SplitList(getenv("PATH")) {
		if dir == "" {
			continue
		}
		exe := filepath.Join(dir, "python3")
		if _, err := os.Stat(exe); err != nil {
			continue
		}
		add(filepath.Dir(filepath.Clean(dir)))
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			add(filepath.Dir(filepath.Dir(real)))
		}
	}
	if home != "" {
		add(filepath.Join(home, ".local"))
	}
	for _, p := range systemPrefixes {
		add(p)
	}
	return prefixes
}

// installPrefix is the Python environment's prefix of a binary that pip installed into it
// (PREFIX/lib/python3.X/site-packages/PACKAGE/.../needle: the wheel's layout), found from the
// path alone; "" when exe is not inside a site-packages or dist-packages folder. It lets a
// `needle` started without activating its venv find the cuBLAS that torch installed beside it.
func installPrefix(exe string) string {
	for dir := filepath.Dir(exe); dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if b := filepath.Base(dir); b != "site-packages" && b != "dist-packages" {
			continue
		}
		py := filepath.Dir(dir)
		if lib := filepath.Dir(py); strings.HasPrefix(filepath.Base(py), "python3") && filepath.Base(lib) == "lib" {
			return filepath.Dir(lib)
		}
		return ""
	}
	return ""
}

// executable is os.Executable (a variable so that tests can place the binary in a fake tree).
var executable = os.Executable

// systemPrefixes are where the system's own pip installs (a variable so that tests can point
// them into a fake tree).
var systemPrefixes = []string{"/usr/local", "/usr"}

// findCublas opens the first candidate that loads (host.h's nl_cublas_open) and returns its
// path. A missing file is passed over; a file that exists but does not load (wrong
// architecture, missing libcublasLt) is an error of its own in the final message, so the user
// sees why their cuBLAS was not taken.
func findCublas(getenv func(string) string, home string) (string, error) {
	cands, places := cublasSearch(getenv, home)
	var failed []string
	for _, c := range cands {
		if filepath.IsAbs(c) || strings.ContainsRune(c, '/') {
			if _, err := os.Stat(c); err != nil {
				if getenv(CublasEnv) != "" {
					return "", fmt.Errorf("%w: %s=%s: %v", ErrNoCublas, CublasEnv, c, err)
				}
				continue
			}
		}
		cpath := C.CString(c)
		var nolib bool
		err := Call(func(e unsafe.Pointer, n int) int {
			st := int(C.nl_cublas_open(cpath, (*C.char)(e), C.size_t(n)))
			nolib = st == C.NL_CUDA_NOLIB
			return st
		})
		C.free(unsafe.Pointer(cpath))
		switch {
		case err == nil:
			return c, nil
		case !nolib: // it opened, but lacks a call needle makes
			return "", fmt.Errorf("%w: %v", ErrNoCublas, err)
		case filepath.IsAbs(c) || getenv(CublasEnv) != "":
			failed = append(failed, fmt.Sprintf("dlopen %s: %v", c, err))
		}
	}
	msg := fmt.Sprintf("%s or %s not found; looked in %s (pip install nvidia-cublas for CUDA 13 or nvidia-cublas-cu12 for CUDA 12, or set %s to the library's path)",
		cublasSonames[0], cublasSonames[1], strings.Join(places, ", "), CublasEnv)
	if len(failed) > 0 {
		msg = strings.Join(failed, "; ") + "; looked in " + strings.Join(places, ", ")
	}
	return "", fmt.Errorf("%w: %s", ErrNoCublas, msg)
}

// ErrNoCublas is wrapped by every error that means "no usable cuBLAS here".
var ErrNoCublas = errors.New("no cuBLAS")

var (
	cublasOnce sync.Once
	cublasPath string
	cublasErr  error
)

// loadCublas finds and opens cuBLAS once per process.
func loadCublas() (string, error) {
	cublasOnce.Do(func() {
		home, _ := os.UserHomeDir()
		cublasPath, cublasErr = findCublas(os.Getenv, home)
	})
	return cublasPath, cublasErr
}

// BLAS is a cuBLAS handle on a device. Its calls run under the device's rules (the host core
// serializes a device's calls), and a failure marks the device unhealthy as driver errors do.
type BLAS struct {
	dev *Device
	h   *C.nl_blas
}

// CublasPath is the cuBLAS library this process loaded (or would load), or an error wrapping
// ErrNoCublas saying where it looked.
func CublasPath() (string, error) { return loadCublas() }

// NewBLAS loads cuBLAS (once per process) and creates a handle on dev (cublasCreate).
func (dev *Device) NewBLAS() (*BLAS, error) {
	if _, err := loadCublas(); err != nil {
		return nil, err
	}
	b := &BLAS{dev: dev}
	err := Call(func(e unsafe.Pointer, n int) int {
		return int(C.nl_blas_create(dev.h, &b.h, (*C.char)(e), C.size_t(n)))
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Destroy releases the handle (cublasDestroy).
func (b *BLAS) Destroy() error {
	return Call(func(e unsafe.Pointer, n int) int { return int(C.nl_blas_destroy(b.h, (*C.char)(e), C.size_t(n))) })
}

// Op is a cuBLAS operand transform (cublasOperation_t).
type Op int32

// The operand transforms.
const (
	OpN Op = 0 // as stored
	OpT Op = 1 // transposed
)

// DataType is a cudaDataType_t of GemmEx's inputs.
type DataType int32

// The input types GemmEx takes.
const (
	R32F DataType = 0 // CUDA_R_32F
	R16F DataType = 2 // CUDA_R_16F
)

// GemmEx computes C = alpha*op(A)*op(B) + beta*C in cuBLAS's column-major convention: op(A) is
// m x k, op(B) k x n, C m x n with leading dimension ldc. A and B (device addresses, see
// Buffer.Addr) hold elements of type in; C is fp32 and the products accumulate in fp32
// (CUBLAS_COMPUTE_32F, the default algorithm). It is queued on the handle's stream: a later
// Launch or Download on the default stream waits for it.
func (b *BLAS) GemmEx(opA, opB Op, m, n, k int, alpha float32, a uint64, lda int, bm uint64, ldb int,
	in DataType, beta float32, c uint64, ldc int) error {
	for _, v := range []int{m, n, k, lda, ldb, ldc} {
		if v < 0 || v > math.MaxInt32 {
			return fmt.Errorf("cublasGemmEx: size %d outside 0..%d (m=%d n=%d k=%d lda=%d ldb=%d ldc=%d)", v, math.MaxInt32, m, n, k, lda, ldb, ldc)
		}
	}
	return Call(func(e unsafe.Pointer, nn int) int {
		return int(C.nl_blas_gemm_ex(b.h, C.int32_t(opA), C.int32_t(opB), C.int32_t(m), C.int32_t(n), C.int32_t(k),
			C.float(alpha), C.uint64_t(a), C.int32_t(lda), C.uint64_t(bm), C.int32_t(ldb), C.int32_t(in),
			C.float(beta), C.uint64_t(c), C.int32_t(ldc), (*C.char)(e), C.size_t(nn)))
	})
}
