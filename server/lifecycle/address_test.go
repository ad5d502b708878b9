package lifecycle

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
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

	// Two servers: the first to drain removes its file.
	b, _, err := writeAddress(dir, "127.0.0.1:8002", "127.0.0.1", 8002)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.withdraw(); err != nil {
		t.Fatal(err)
	}
	if got := addressFiles(t, dir); len(got) != 1 || got["Host127.0.0.1_IP8002.txt"] == "" {
		t.Fatalf("after the first of two exits: %v", got)
	}

	// The last server to drain keeps its file (the folder never turns empty), and the next server
	// to write into the folder, on another port, removes it.
	if _, err := b.withdraw(); err != nil {
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

	// A restart on the same port (--replace): the new server's file replaces the old one's,
	// and the old server draining after that leaves the new file alone.
	d, _, err := writeAddress(dir, "127.0.0.1:8003", "127.0.0.1", 8003)
	if err != nil {
		t.Fatal(err)
	}
	if what, err := c.withdraw(); err != nil || addressFiles(t, dir)["Host127.0.0.1_IP8003.txt"] != "127.0.0.1:8003" {
		t.Fatalf("old server's exit after a restart on its port: %q %v, files %v", what, err, addressFiles(t, dir))
	}
	if _, err := d.withdraw(); err != nil {
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

// Servers that drain together (one SIGTERM to a whole job) leave exactly one file: the folder's
// lock orders their decisions, so they cannot all see another's file and all remove theirs.
func TestAddressLastOfServersDrainingTogether(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "addr")
	for round := range 20 {
		var files []*addressFile
		for port := 8001; port <= 8004; port++ {
			a, _, err := writeAddress(dir, fmt.Sprintf("127.0.0.1:%d", port), "127.0.0.1", port)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, a)
		}
		var wg sync.WaitGroup
		for _, a := range files {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := a.withdraw(); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if got := addressFiles(t, dir); len(got) != 1 {
			t.Fatalf("round %d: %d address files after 4 servers drained together, want 1: %v", round, len(got), got)
		}
	}
}
