package bm25

import (
	"bufio"
	"bytes"
	"os"
	"testing"
)

// checkRow fails t when rowReader reads line otherwise than encoding/json; it reports whether
// scanRow read the line itself.
func checkRow(t *testing.T, r *rowReader, line []byte) (scanned bool) {
	t.Helper()
	wantID, wantText, wantOK := unmarshalRow(line)
	id, text, ok := r.read(line)
	if !bytes.Equal(id, wantID) || text != wantText || ok != wantOK {
		t.Fatalf("%q: read (%q, %q, %v), encoding/json (%q, %q, %v)", line, id, text, ok, wantID, wantText, wantOK)
	}
	_, _, _, scanned = scanRow(line, nil)
	return scanned
}

var rowSeeds = []string{
	`{"id": "0", "contents": "\"entity\"\nthat which is perceived"}` + "\n",
	`{"contents":"x y","id":"7"}`,
	`{"id": 12, "contents": "a number id"}`,
	`{"id": "a", "contents": null}`,
	`{"id": "a"}`,
	`{}`,
	` { } ` + "\r\n",
	`{"ID": "upper", "Contents": "folded keys"}`,
	`{"id": "a", "contents": "first", "contents": "last wins"}`,
	`{"id": "\u00e9\u4e2d\ud83d\ude00 \ud800 lone", "contents": "\u0041\/\\\b\f\r\t"}`,
	`{"id": "a", "contents": "bad \x escape"}`,
	`{"id": "a", "contents": "ok"} trailing`,
	`{"id": "a", "contents": "ok",}`,
	`{"id": "a" "contents": "ok"}`,
	`{"id": "a", "contents": "unterminated`,
	`{"id": "a", "title": {"nested": [1, 2]}, "contents": "text"}`,
	`{"id": "a", "title": "other \"key\"", "contents": "text"}`,
	"{\"id\": \"a\", \"contents\": \"raw\ttab\"}",
	"{\"id\": \"a\", \"contents\": \"bad utf-8 \xff\xfe\"}",
	"{\"id\": \"a\", \"contentſ\": \"long s key\"}",
	`["not", "an object"]`,
	``,
	"\n",
}

func TestRowReaderMatchesEncodingJSON(t *testing.T) {
	var r rowReader
	for _, s := range rowSeeds {
		checkRow(t, &r, []byte(s))
	}
	// the corpus lines are of the shape scanRow reads itself
	f, err := os.Open("testdata/corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	lines := 0
	for sc.Scan() {
		if !checkRow(t, &r, append(sc.Bytes(), '\n')) {
			t.Fatalf("scanRow left %q to encoding/json", sc.Text())
		}
		lines++
	}
	if err := sc.Err(); err != nil || lines < 2000 {
		t.Fatalf("%d lines read: %v", lines, err)
	}
}

// FuzzRowReader: any line reads as encoding/json reads it.
func FuzzRowReader(f *testing.F) {
	for _, s := range rowSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var r rowReader
		checkRow(t, &r, line)
	})
}
