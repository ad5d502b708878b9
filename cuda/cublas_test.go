package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeTree makes files at the given paths under root (contents that are not a library).
func fakeTree(t *testing.T, root string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("not a shared library\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestCublasSearchOrder pins where cuBLAS is looked for: CUDA_HOME, the loader path,
// /usr/local/cuda, then the Python environments (virtualenv, conda, each python3 on PATH by
// its prefix, ~/.local), .so.13 before .so.12 in each place.
func TestCublasSearchOrder(t *testing.T) {
	root := t.TempDir()
	sp := "lib/python3.11/site-packages/nvidia/cublas/lib/"
	fakeTree(t, root,
		"venv/"+sp+"libcublas.so.12",
		"conda/"+sp+"libcublas.so.13",
		"usr/bin/python3",
		"usr/"+sp+"libcublas.so.12",
		"usr/lib/python3.12/dist-packages/nvidia/cublas/lib/libcublas.so.12",
		"home/.local/"+sp+"libcublas.so.12",
		"nopython/"+sp+"libcublas.so.12", // a prefix without python3 in its bin/: not searched
	)
	env := envOf(map[string]string{
		"CUDA_HOME":    filepath.Join(root, "cuda"),
		"VIRTUAL_ENV":  filepath.Join(root, "venv"),
		"CONDA_PREFIX": filepath.Join(root, "conda"),
		"PATH":         filepath.Join(root, "nopython/bin") + ":" + filepath.Join(root, "usr/bin"),
	})
	got := cublasCandidates(env, filepath.Join(root, "home"))
	want := []string{
		root + "/cuda/lib64/libcublas.so.13", root + "/cuda/lib/libcublas.so.13",
		root + "/cuda/lib64/libcublas.so.12", root + "/cuda/lib/libcublas.so.12",
		"libcublas.so.13", "libcublas.so.12",
		"/usr/local/cuda/lib64/libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so.12",
		root + "/venv/" + sp + "libcublas.so.12",
		root + "/conda/" + sp + "libcublas.so.13",
		root + "/usr/" + sp + "libcublas.so.12",
		root + "/usr/lib/python3.12/dist-packages/nvidia/cublas/lib/libcublas.so.12",
		root + "/home/.local/" + sp + "libcublas.so.12",
	}
	if !slices.Equal(got, want) {
		t.Errorf("candidates:\n got %q\nwant %q", got, want)
	}

	// An explicit NEEDLE_CUBLAS is the only candidate.
	explicit := envOf(map[string]string{CublasEnv: "/opt/x/libcublas.so.12", "CUDA_HOME": root})
	if got := cublasCandidates(explicit, root); !slices.Equal(got, []string{"/opt/x/libcublas.so.12"}) {
		t.Errorf("with %s: %q", CublasEnv, got)
	}
}

// TestPythonOnPathThroughLink: a python3 on PATH that links into another prefix (a venv's
// bin/python3 -> /usr/bin/python3.x) contributes both prefixes.
func TestPythonOnPathThroughLink(t *testing.T) {
	root := t.TempDir()
	fakeTree(t, root, "real/bin/python3.11")
	if err := os.MkdirAll(filepath.Join(root, "env/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "real/bin/python3.11"), filepath.Join(root, "env/bin/python3")); err != nil {
		t.Fatal(err)
	}
	got := pythonPrefixes(envOf(map[string]string{"PATH": filepath.Join(root, "env/bin")}), "")
	want := []string{filepath.Join(root, "env"), filepath.Join(root, "real")}
	if !slices.Equal(got, want) {
		t.Errorf("prefixes %q, want %q", got, want)
	}
}

// TestFindCublasLoadErrors: a found file that is not a library fails with dlopen's reason and
// its path (the real dlopen, on a fake file); an explicit path that does not exist names the
// variable; nothing found says where it looked and how to fix it.
func TestFindCublasLoadErrors(t *testing.T) {
	root := t.TempDir()
	fake := filepath.Join(root, "venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.12")
	fakeTree(t, root, "venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.12")
	_, _, err := findCublas(envOf(map[string]string{"VIRTUAL_ENV": filepath.Join(root, "venv")}), "")
	if !errors.Is(err, ErrNoCublas) || !strings.Contains(err.Error(), "dlopen "+fake+":") {
		t.Errorf("fake library in a virtualenv: %v", err)
	}

	missing := filepath.Join(root, "nothing/libcublas.so.12")
	_, _, err = findCublas(envOf(map[string]string{CublasEnv: missing}), "")
	if !errors.Is(err, ErrNoCublas) || !strings.Contains(err.Error(), CublasEnv+"="+missing) {
		t.Errorf("%s to a missing file: %v", CublasEnv, err)
	}

	if h, path, err := findCublas(envOf(map[string]string{}), ""); err == nil {
		t.Skipf("this machine has cuBLAS (%s, handle %#x): the not-found message is not reachable", path, h)
	} else if !errors.Is(err, ErrNoCublas) || !strings.Contains(err.Error(), "libcublas.so.13 or libcublas.so.12 not found") ||
		!strings.Contains(err.Error(), CublasEnv) {
		t.Errorf("nothing found: %v", err)
	}
}

// TestCublasError names the call and the status.
func TestCublasError(t *testing.T) {
	if err := cublasError("cublasGemmEx", 0); err != nil {
		t.Errorf("success: %v", err)
	}
	if err := cublasError("cublasGemmEx", 7); err == nil || err.Error() != "cublasGemmEx: CUBLAS_STATUS_INVALID_VALUE (7)" {
		t.Errorf("status 7: %v", err)
	}
	if err := cublasError("cublasCreate", 99); err == nil || err.Error() != "cublasCreate: unknown cuBLAS status (99)" {
		t.Errorf("status 99: %v", err)
	}
}
