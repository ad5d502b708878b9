package synth

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestWriteRowsAreCorpusRows: every row is a JSON object with the id, contents and url
// fields of a wiki-18 row, in wiki-18's length range, and the output is deterministic.
func TestWriteRowsAreCorpusRows(t *testing.T) {
	var a, b bytes.Buffer
	if err := Write(&a, 500, Words, 7); err != nil {
		t.Fatal(err)
	}
	Write(&b, 500, Words, 7)
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("same seed, different corpus")
	}
	lines := bytes.Split(bytes.TrimSuffix(a.Bytes(), []byte("\n")), []byte("\n"))
	if len(lines) != 500 {
		t.Fatalf("%d lines, want 500", len(lines))
	}
	for i, l := range lines {
		var row struct{ ID, Contents, URL string }
		if err := json.Unmarshal(l, &row); err != nil || row.URL != URL(int64(i)) || row.Contents[0] != '"' {
			t.Fatalf("line %d %q: %+v %v", i, l, row, err)
		}
	}
	if per := a.Len() / 500; per < 600 || per > 850 {
		t.Errorf("%d bytes a row, want wiki-18's ~650-750", per)
	}
}
