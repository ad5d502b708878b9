package jsonfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLocalPath: a file inside the folder is recorded relative to it and resolves back to the
// same file, also from another working directory and after the folder moved; one outside
// stays absolute; an absolute path of an older description resolves to itself.
func TestLocalPath(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "idx")
	t.Chdir(root)
	for _, c := range []struct{ path, want string }{
		{"idx/corpus.jsonl", "corpus.jsonl"},
		{filepath.Join(dir, "sub", "model"), filepath.Join("sub", "model")},
		{"other.jsonl", filepath.Join(root, "other.jsonl")},
		{"idx/../idx2/x", filepath.Join(root, "idx2", "x")},
		{"", ""},
	} {
		got := LocalPath("idx", c.path)
		if got != c.want {
			t.Errorf("LocalPath(idx, %q) = %q, want %q", c.path, got, c.want)
		}
		if abs, _ := filepath.Abs(c.path); c.path != "" && ResolvePath(dir, got) != abs {
			t.Errorf("ResolvePath(%s, %q) = %q, want %q", dir, got, ResolvePath(dir, got), abs)
		}
	}
	moved := filepath.Join(root, "copied")
	if err := os.Mkdir(moved, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(moved)
	if got := ResolvePath(".", "corpus.jsonl"); got != filepath.Join(moved, "corpus.jsonl") {
		t.Errorf("ResolvePath from the moved folder: %q", got)
	}
	if got := ResolvePath(moved, "/data/wiki.jsonl"); got != "/data/wiki.jsonl" {
		t.Errorf("an absolute path resolved to %q", got)
	}
}
