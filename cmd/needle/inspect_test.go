package main

import (
	"path/filepath"
	"testing"
)

// needle inspect's flag mistakes are errors (the report itself: indexbuild's tests).
func TestInspectFlags(t *testing.T) {
	for _, args := range [][]string{{}, {"--index", "x", "extra"}, {"--index", "x", "--max-bad", "-1"},
		{"--index", filepath.Join(t.TempDir(), "missing")}} {
		if err := runInspect(args); err == nil {
			t.Errorf("inspect %v: no error", args)
		}
	}
}
