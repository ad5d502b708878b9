package layout

import (
	"bytes"
	"go/format"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestGofmt: every Go file git tracks is as gofmt writes it (a merge that moved a package
// leaves its importers' import blocks out of order; a conflict marker fails here by name).
func TestGofmt(t *testing.T) {
	out, err := exec.Command("git", "-C", "../..", "ls-files", "*.go").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, name := range strings.Fields(string(out)) {
		src, err := os.ReadFile("../../" + name)
		if err != nil {
			t.Fatal(err)
		}
		formatted, err := format.Source(src)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if !bytes.Equal(src, formatted) {
			t.Errorf("%s is not as gofmt writes it: run gofmt -w %s", name, name)
		}
	}
}
