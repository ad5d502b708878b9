// Package testenv locates the real resources tests use (the MiniLM model, the pinned Python
// venv for reference and interop scripts). `make test` sets NEEDLE_STRICT=1: a missing
// resource then fails the test instead of skipping it, so CI can never pass by skipping.
package testenv

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Cache is the folder `make setup` fills (NEEDLE_CACHE, default ~/.cache/needle).
func Cache() string {
	if c := os.Getenv("NEEDLE_CACHE"); c != "" {
		return c
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "needle")
}

// Missing skips t because what is absent, or fails it under NEEDLE_STRICT=1. For resources
// `make test` provides (setup downloads, `make native` outputs).
func Missing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("NEEDLE_STRICT") == "1" {
		t.Fatalf("%s is missing; `make test` sets it up", what)
	}
	t.Skipf("%s is missing; `make test` sets it up", what)
}

// MiniLMDir returns the folder of sentence-transformers/all-MiniLM-L6-v2 (real weights).
func MiniLMDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(Cache(), "models", "all-MiniLM-L6-v2")
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err != nil {
		Missing(t, "MiniLM model "+dir)
	}
	return dir
}

// Python returns the venv interpreter that has the pinned reference packages
// (tools/requirements.txt: numpy, faiss-cpu, tokenizers, requests, aiohttp).
func Python(t testing.TB) string {
	t.Helper()
	py := filepath.Join(Cache(), "venv", "bin", "python")
	if _, err := exec.LookPath(py); err != nil {
		Missing(t, "Python venv "+py)
	}
	return py
}

// HAProxy returns the path of Debian's haproxy, the front of fixed-URL clients (needle front).
func HAProxy(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("haproxy")
	if err != nil {
		Missing(t, "HAProxy (apt haproxy)")
	}
	return path
}

// WordNetDir returns Debian wordnet-base's database folder (data.noun, data.verb, ...).
func WordNetDir(t testing.TB) string {
	t.Helper()
	dir := "/usr/share/wordnet"
	if _, err := os.Stat(filepath.Join(dir, "data.noun")); err != nil {
		Missing(t, "WordNet database "+dir+" (apt wordnet-base)")
	}
	return dir
}

// ReadJSONL reads one JSON value per line of the file at path into a []T (test data: golden
// texts, reference outputs); a line that is not a T fails the test.
func ReadJSONL[T any](t testing.TB, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s line %d: %v", path, len(out)+1, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
