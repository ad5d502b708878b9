package main

import (
	"os"
	"path/filepath"
	"testing"

	"needle/internal/atomicfile"
)

// addressFiles lists what ASearcher's client sees: the folder's Host*_IP*.txt files and
// their contents.
func addressFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "Host*_IP*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(n)] = string(b)
	}
	return out
}

func TestAddressFileLifecycle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "addr")
	a, _, err := writeAddress(dir, "127.0.0.1:8001", "127.0.0.1", 8001)
	if err != nil {
		t.Fatal(err)
	}
	if got := addressFiles(t, dir); len(got) != 1 || got["Host127.0.0.1_IP8001.txt"] != "127.0.0.1:8001" {
		t.Fatalf("after write: %v", got)
	}

	// Two servers: the first to exit removes its file.
	b, _, err := writeAddress(dir, "127.0.0.1:8002", "127.0.0.1", 8002)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.remove(); err != nil {
		t.Fatal(err)
	}
	if got := addressFiles(t, dir); len(got) != 1 || got["Host127.0.0.1_IP8002.txt"] == "" {
		t.Fatalf("after the first of two exits: %v", got)
	}

	// The last server keeps its file (the folder never turns empty), and the next server
	// to write into the folder, on another port, removes it.
	if _, err := b.remove(); err != nil {
		t.Fatal(err)
	}
	if got := addressFiles(t, dir); len(got) != 1 || got["Host127.0.0.1_IP8002.txt"] != "127.0.0.1:8002" {
		t.Fatalf("after the last exit: %v, want its file kept", got)
	}
	c, _, err := writeAddress(dir, "127.0.0.1:8003", "127.0.0.1", 8003)
	if err != nil {
		t.Fatal(err)
	}
	if got := addressFiles(t, dir); len(got) != 1 || got["Host127.0.0.1_IP8003.txt"] != "127.0.0.1:8003" {
		t.Fatalf("after a new server wrote: %v, want only its file", got)
	}
	if markers, _ := filepath.Glob(filepath.Join(dir, leftPrefix+"*")); len(markers) != 0 {
		t.Errorf("markers left: %v", markers)
	}

	// A restart on the same port: the new server's file replaces the one kept, and the old
	// server exiting after that leaves the new file alone.
	d, _, err := writeAddress(dir, "127.0.0.1:8003", "127.0.0.1", 8003)
	if err != nil {
		t.Fatal(err)
	}
	if what, err := c.remove(); err != nil || addressFiles(t, dir)["Host127.0.0.1_IP8003.txt"] != "127.0.0.1:8003" {
		t.Fatalf("old server's exit after a restart on its port: %q %v, files %v", what, err, addressFiles(t, dir))
	}
	if _, err := d.remove(); err != nil {
		t.Fatal(err)
	}

	// A kept file rewritten by another server since is not removed by the next needle.
	if err := atomicfile.Write(filepath.Join(dir, "Host127.0.0.1_IP8003.txt"), []byte("10.0.0.9:8003")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := writeAddress(dir, "127.0.0.1:8004", "127.0.0.1", 8004); err != nil {
		t.Fatal(err)
	}
	if got := addressFiles(t, dir); len(got) != 2 || got["Host127.0.0.1_IP8003.txt"] != "10.0.0.9:8003" {
		t.Fatalf("a file another server rewrote: %v, want it kept", got)
	}
}
