package jsonl

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzStrings: any input either yields texts that re-encode to its lines, or an error
// naming a line; never a panic.
func FuzzStrings(f *testing.F) {
	f.Add([]byte("\"a\"\n\"b\\u00e9\"\n"))
	f.Add([]byte("\"ok\"\n42\n"))
	f.Add([]byte("\"unterminated\n"))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		src := NewStrings(bytes.NewReader(b), "fuzz")
		texts, err := src.NextN(1 << 20)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz line ") {
				t.Fatalf("error %q does not name the line", err)
			}
			return
		}
		if len(texts) != src.Line() {
			t.Fatalf("%d texts from %d lines", len(texts), src.Line())
		}
	})
}
