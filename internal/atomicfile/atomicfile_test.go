package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, content := range []string{"first", "second"} {
		if err := Write(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); string(got) != content {
			t.Fatalf("content %q, want %q", got, content)
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
			t.Fatalf("mode %v, want 0644", st.Mode().Perm())
		}
	}
}

// A failing fill leaves the old file and no temp file.
func TestCreateFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := Write(path, []byte("old")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	err := Create(path, func(f *os.File) error {
		f.WriteString("half")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want %v", err, boom)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Fatalf("content %q after a failed write, want old", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d entries in folder, want 1 (temp file removed)", len(entries))
	}
}

func TestUnwritableFolder(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "missing", "f"), nil); err == nil {
		t.Fatal("Write into a missing folder succeeded")
	}
}

// The temp files of a Create whose process died are found by name and removed; other
// files, dotfiles included, stay.
func TestRemoveTemps(t *testing.T) {
	dir := t.TempDir()
	f, err := os.CreateTemp(dir, ".index.faiss"+tempMark+"*") // as Create names them
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	keep := []string{"index.faiss", ".hidden", ".x.tmp", ".x.tmpfile", "a.tmp123", ".tmp123"}
	for _, name := range append(keep, ".shard-00000001.bin.tmp42") {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := RemoveTemps(dir)
	if err != nil || len(removed) != 2 {
		t.Fatalf("removed %v, %v; want the 2 temp files", removed, err)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != len(keep) {
		t.Errorf("%d files left, want %v", len(left), keep)
	}
	if removed, err := RemoveTemps(filepath.Join(dir, "missing")); removed != nil || err != nil {
		t.Errorf("missing folder: %v, %v", removed, err)
	}
}
