package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchDispatch(t *testing.T) {
	dir := t.TempDir()
	queries, trace := filepath.Join(dir, "queries.txt"), filepath.Join(dir, "trace.jsonl")
	os.WriteFile(queries, []byte("a\nb\nc\nd\ne\n"), 0o644)
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
		{[]string{"bench", "trace", "--queries", queries, "--out", trace}, 1}, // 512 prompts need more texts
		{[]string{"bench", "trace", "--queries", queries, "--out", trace, "--prompts", "1", "--turns", "2", "--own", "3"}, 0},
	} {
		if code := runMain(tc.args); code != tc.code {
			t.Errorf("needle %v: exit %d, want %d", tc.args, code, tc.code)
		}
	}
	if b, err := os.ReadFile(trace); err != nil || strings.Count(string(b), "\n") != 16 {
		t.Errorf("bench trace --prompts 1 --turns 2: %v, %q; want 16 lines", err, b)
	}
	if _, err := os.Stat(filepath.Join(dir, "corpus.jsonl")); err != nil {
		t.Errorf("bench docstore --dir: %v", err)
	}
}
