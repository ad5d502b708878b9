package bench

import (
	"bytes"
	"strings"
	"testing"
)

func TestDocstoreReport(t *testing.T) {
	var out bytes.Buffer
	opt := DocstoreOptions{Rows: 500, Words: 20, Rounds: 1, Lookups: 200, Dir: t.TempDir()}
	if err := Docstore(&out, opt); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"corpus           500 rows, ", "plain read ", "sidecar build ", "open (fresh) ",
		"row lookup ", "row lookup ", "validate ", "url index build ", "url lookup ", "url lookup "}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want prefix %q", i, lines[i], w)
		}
	}
	for _, s := range []string{"allocs/row, 200 random rows", ", 0 bad rows ", ", 500 urls", "the bench's 400 url strings"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, out.String())
		}
	}
}

func TestDocstoreBadOptions(t *testing.T) {
	err := Docstore(&bytes.Buffer{}, DocstoreOptions{Rows: 10, Words: 10, Rounds: 1})
	if err == nil || !strings.Contains(err.Error(), "Lookups: 0, want > 0") {
		t.Fatalf("err = %v", err)
	}
}
