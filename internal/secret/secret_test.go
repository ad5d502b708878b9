package secret

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if got, err := ReadFile(write("t", " s3cret\n")); err != nil || string(got) != "s3cret" {
		t.Fatalf("token %q, %v", got, err)
	}
	if _, err := ReadFile(write("empty", "\n \n")); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("an empty token file: %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "absent")); err == nil {
		t.Fatal("an absent token file was read")
	}
}
