package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBenchDispatch(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"bench", "--help"}, 0},
		{[]string{"bench"}, 1},
		{[]string{"bench", "nosuch"}, 1},
		{[]string{"bench", "kernels", "--help"}, 0},
		{[]string{"bench", "kernels", "extra"}, 1},
		{[]string{"bench", "docstore", "--rows", "0"}, 1},
		// The flags reach bench.Docstore: the corpus lands in --dir, which is kept.
		{[]string{"bench", "docstore", "--rows", "50", "--words", "5", "--rounds", "1", "--lookups", "10", "--dir", dir}, 0},
	} {
		if code := runMain(tc.args); code != tc.code {
			t.Errorf("needle %v: exit %d, want %d", tc.args, code, tc.code)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "corpus.jsonl")); err != nil {
		t.Errorf("bench docstore --dir: %v", err)
	}
}
