package cuda

import (
	"errors"
	"fmt"
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

// fakeSystem points the system's Python prefixes (/usr/local, /usr) into root for the test.
func fakeSystem(t *testing.T, root string) {
	old := systemPrefixes
	systemPrefixes = []string{filepath.Join(root, "sys/usr/local"), filepath.Join(root, "sys/usr")}
	t.Cleanup(func() { systemPrefixes = old })
}

// TestCublasSearchOrder pins where cuBLAS is looked for: CUDA_HOME, the loader path,
// /usr/local/cuda, then the Python environments (virtualenv, conda, each python3 on PATH by
// its prefix, ~/.local, the system's /usr/local and /usr) in both wheel layouts (CUDA 13:
// nvidia/cu13/lib, CUDA 12: nvidia/cublas/lib), .so.13 before .so.12 in each place.
func TestCublasSearchOrder(t *testing.T) {
	root := t.TempDir()
	fakeSystem(t, root)
	sp := "lib/python3.11/site-packages/nvidia/cublas/lib/"
	cu13 := "lib/python3.12/site-packages/nvidia/cu13/lib/"
	fakeTree(t, root,
		"venv/"+sp+"libcublas.so.12",
		"venv/"+cu13+"libcublas.so.13",
		"conda/"+sp+"libcublas.so.13",
		"usr/bin/python3",
		"usr/"+sp+"libcublas.so.12",
		"usr/lib/python3.12/dist-packages/nvidia/cublas/lib/libcublas.so.12",
		"home/.local/"+cu13+"libcublas.so.13",
		"sys/usr/local/lib/python3.12/dist-packages/nvidia/cu13/lib/libcublas.so.13",   // root's pip on Debian/Ubuntu
		"sys/usr/local/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12", // python.org builds
		"sys/usr/lib/python3/dist-packages/nvidia/cu13/lib/libcublas.so.13",            // Debian's own packages
		"nopython/"+sp+"libcublas.so.12",                                               // a prefix without python3 in its bin/: not searched
		"venv/"+cu13+"libcublas.so.14",                                                 // a soname needle does not call
	)
	env := envOf(map[string]string{
		"CUDA_HOME":    filepath.Join(root, "cuda"),
		"VIRTUAL_ENV":  filepath.Join(root, "venv"),
		"CONDA_PREFIX": filepath.Join(root, "conda"),
		"PATH":         filepath.Join(root, "nopython/bin") + ":" + filepath.Join(root, "usr/bin"),
	})
	got, places := cublasSearch(env, filepath.Join(root, "home"))
	want := []string{
		root + "/cuda/lib64/libcublas.so.13", root + "/cuda/lib/libcublas.so.13",
		root + "/cuda/lib64/libcublas.so.12", root + "/cuda/lib/libcublas.so.12",
		"libcublas.so.13", "libcublas.so.12",
		"/usr/local/cuda/lib64/libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so.12",
		root + "/venv/" + cu13 + "libcublas.so.13",
		root + "/venv/" + sp + "libcublas.so.12",
		root + "/conda/" + sp + "libcublas.so.13",
		root + "/usr/" + sp + "libcublas.so.12",
		root + "/usr/lib/python3.12/dist-packages/nvidia/cublas/lib/libcublas.so.12",
		root + "/home/.local/" + cu13 + "libcublas.so.13",
		root + "/sys/usr/local/lib/python3.12/dist-packages/nvidia/cu13/lib/libcublas.so.13",
		root + "/sys/usr/local/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12",
		root + "/sys/usr/lib/python3/dist-packages/nvidia/cu13/lib/libcublas.so.13",
	}
	if !slices.Equal(got, want) {
		t.Errorf("candidates:\n got %q\nwant %q", got, want)
	}
	wantPlaces := []string{"CUDA_HOME=" + root + "/cuda", `the loader path (LD_LIBRARY_PATH="", ld.so.cache)`, "/usr/local/cuda/lib64",
		fmt.Sprintf("{%[1]s/venv,%[1]s/conda,%[1]s/usr,%[1]s/home/.local,%[1]s/sys/usr/local,%[1]s/sys/usr}/lib/python3*/{site,dist}-packages/{nvidia/cu13/lib,nvidia/cublas/lib}", root)}
	if !slices.Equal(places, wantPlaces) {
		t.Errorf("places:\n got %q\nwant %q", places, wantPlaces)
	}

	// An explicit NEEDLE_CUBLAS is the only candidate.
	explicit := envOf(map[string]string{CublasEnv: "/opt/x/libcublas.so.12", "CUDA_HOME": root})
	if got, _ := cublasSearch(explicit, root); !slices.Equal(got, []string{"/opt/x/libcublas.so.12"}) {
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
	fakeSystem(t, root)
	got := pythonPrefixes(envOf(map[string]string{"PATH": filepath.Join(root, "env/bin")}), "")
	want := []string{filepath.Join(root, "env"), filepath.Join(root, "real"), filepath.Join(root, "sys/usr/local"), filepath.Join(root, "sys/usr")}
	if !slices.Equal(got, want) {
		t.Errorf("prefixes %q, want %q", got, want)
	}
}

// TestInstallPrefix: the binary of the needle_rl wheel finds the environment pip installed it
// into (and so the cuBLAS torch put there) with no VIRTUAL_ENV; other places give none.
func TestInstallPrefix(t *testing.T) {
	for exe, want := range map[string]string{
		"/home/u/venv/lib/python3.12/site-packages/needle_rl/bin/needle":   "/home/u/venv",
		"/usr/local/lib/python3.11/dist-packages/needle_rl/bin/needle":     "/usr/local",
		"/home/u/.local/lib/python3.10/site-packages/needle_rl/bin/needle": "/home/u/.local",
		"/work/needle/bin/needle":   "",
		"/opt/site-packages/needle": "",
	} {
		if got := installPrefix(exe); got != want {
			t.Errorf("installPrefix(%q) = %q, want %q", exe, got, want)
		}
	}
	root := t.TempDir()
	fakeSystem(t, root)
	old := executable
	executable = func() (string, error) {
		return filepath.Join(root, "env/lib/python3.12/site-packages/needle_rl/bin/needle"), nil
	}
	t.Cleanup(func() { executable = old })
	got := pythonPrefixes(envOf(map[string]string{"VIRTUAL_ENV": filepath.Join(root, "other")}), "")
	want := []string{filepath.Join(root, "env"), filepath.Join(root, "other"), filepath.Join(root, "sys/usr/local"), filepath.Join(root, "sys/usr")}
	if !slices.Equal(got, want) {
		t.Errorf("prefixes %q, want %q", got, want)
	}
}

// TestFindCublasLoadErrors: a found file that is not a library fails with dlopen's reason and
// its path (the real dlopen, on a fake file); an explicit path that does not exist names the
// variable; nothing found says where it looked and how to fix it.
func TestFindCublasLoadErrors(t *testing.T) {
	root := t.TempDir()
	fakeSystem(t, root)
	fake := filepath.Join(root, "venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublas.so.13")
	fakeTree(t, root, "venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublas.so.13")
	_, err := findCublas(envOf(map[string]string{"VIRTUAL_ENV": filepath.Join(root, "venv")}), "")
	if !errors.Is(err, ErrNoCublas) || !strings.Contains(err.Error(), "dlopen "+fake+":") ||
		!strings.Contains(err.Error(), "looked in ") {
		t.Errorf("fake CUDA 13 library in a virtualenv: %v", err)
	}

	missing := filepath.Join(root, "nothing/libcublas.so.12")
	_, err = findCublas(envOf(map[string]string{CublasEnv: missing}), "")
	if !errors.Is(err, ErrNoCublas) || !strings.Contains(err.Error(), CublasEnv+"="+missing) {
		t.Errorf("%s to a missing file: %v", CublasEnv, err)
	}

	if path, err := findCublas(envOf(map[string]string{}), ""); err == nil {
		// Not a skip: the GPU check counts skips as failures, and this is a fine outcome there.
		t.Logf("this machine has cuBLAS (%s): the not-found message is not reachable", path)
	} else {
		for _, want := range []string{"libcublas.so.13 or libcublas.so.12 not found", CublasEnv, "nvidia-cublas for CUDA 13",
			"nvidia-cublas-cu12 for CUDA 12", "/usr/local/cuda/lib64", "nvidia/cu13/lib", "nvidia/cublas/lib", "LD_LIBRARY_PATH"} {
			if !errors.Is(err, ErrNoCublas) || !strings.Contains(err.Error(), want) {
				t.Errorf("nothing found: %v; want it to say %q", err, want)
			}
		}
	}
}
