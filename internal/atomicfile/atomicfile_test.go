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
