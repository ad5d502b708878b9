package docstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	"",
	"\n",
	"\n\n\r\n",
	`{"id":"0","contents":"a"}`,
	`{"id":"0","contents":"a"}` + "\n" + `{"id":"1","contents":"b"}` + "\r\n",
	`{"contents":"\"T\"\nx","url":"u"}` + "\n\n" + `{"url":"u","contents":"dup"}`,
	`{"contents":"a\\"}` + "\n" + `{"contents":1}` + "\n" + `[]` + "\n" + `{"url":"` + wikiPrefix + `X"}`,
	"{\"contents\":\"\xff\"}\r",
	`{"url":"a\u0062","contents":"esc"}` + "\n" + `{"url":"ab","contents":"raw"}` + "\n",
	`{"a":{"contents":"nested"},"contents":"top","b":[1,-2.5e+3,true,false,null,"x\"y"]}`,
	`  {  "contents"  :  "spaced"  }  `,
	`{"\u0063ontents":"escaped key"}`,
}

// oracleLines splits data as the corpus defines lines: every "\n" ends one, bytes after the
// last "\n" are one more, and one "\r" before a "\n" or the end belongs to the ending.
func oracleLines(data []byte) [][]byte {
	lines := bytes.Split(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] == '\n' {
		lines = lines[:len(lines)-1]
	}
	for i, l := range lines {
		lines[i] = bytes.TrimSuffix(l, []byte("\r"))
	}
	return lines
}

// oracleField decodes line with encoding/json as Python's json.loads(line)[key] sees it:
// a JSON object whose key (last duplicate wins) is a string. ok is false for bad rows.
func oracleField(line []byte, key string) (string, bool) {
	var m map[string]json.RawMessage
	trimmed := bytes.TrimLeft(line, " \t\r\n")
	if !utf8.Valid(line) || len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(line, &m) != nil {
		return "", false
	}
	var s string
	if raw, found := m[key]; !found || len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// FuzzCorpus: rows never shift, the row count is the line count, and Row/Contents agree
// with encoding/json on which rows are good and what they contain.
func FuzzCorpus(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "c.jsonl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := OpenCorpus(path, Options{})
		if len(data) == 0 {
			if err == nil {
				t.Fatal("empty corpus opened without error")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		want := oracleLines(data)
		if c.Len() != int64(len(want)) {
			t.Fatalf("Len = %d, want %d", c.Len(), len(want))
		}
		for i, w := range want {
			line, err := c.lines.line(int64(i))
			if err != nil || !bytes.Equal(line, w) {
				t.Fatalf("line %d = %q, %v; want %q", i, line, err, w)
			}
			contents, good := oracleField(w, "contents")
			row, err := c.Row(int64(i))
			var bre *BadRowError
			if good != (err == nil) || (!good && (!errors.As(err, &bre) || bre.Line != int64(i)+1)) {
				t.Fatalf("Row(%d) of %q: err = %v, oracle says good = %v", i, w, err, good)
			}
			if good && !bytes.Equal(row, w) {
				t.Fatalf("Row(%d) = %q, want %q", i, row, w)
			}
			if s, err := c.Contents(int64(i)); good && (err != nil || s != contents) {
				t.Fatalf("Contents(%d) of %q = %q, %v; want %q", i, w, s, err, contents)
			}
		}
	})
}

// FuzzPages: every url the anchor's dict would hold is found (the last duplicate's row),
// also through the index.php/ spelling, and the rest are counted as bad.
func FuzzPages(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		path := filepath.Join(t.TempDir(), "pages.jsonl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := OpenPages(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		want := map[string][]byte{}
		var bad int64
		for _, line := range oracleLines(data) {
			if url, ok := oracleField(line, "url"); ok {
				want[url] = line
			} else {
				bad++
			}
		}
		if p.BadRows() != bad {
			t.Fatalf("BadRows = %d, want %d", p.BadRows(), bad)
		}
		for url, line := range want {
			if strings.Contains(url, "index.php/") {
				continue // the anchor rewrites every request: such a stored url is unreachable
			}
			if got, ok := p.Lookup(url); !ok || !bytes.Equal(got, line) {
				t.Fatalf("Lookup(%q) = %q, %v; want %q", url, got, ok, line)
			}
			slashed := strings.ReplaceAll(url, "index.php?title=", "index.php/")
			if got, ok := p.Lookup(slashed); !ok || !bytes.Equal(got, line) {
				t.Fatalf("Lookup(%q) = %q, %v; want %q", slashed, got, ok, line)
			}
			if _, stored := want[url+"#miss"]; !stored {
				if got, ok := p.Lookup(url + "#miss"); ok {
					t.Fatalf("Lookup(%q) found %q", url+"#miss", got)
				}
			}
		}
	})
}

// FuzzNormalizeURL: the rewrite leaves no "index.php/", grows the url by 6 bytes per
// rewrite, leaves urls without "index.php/" alone, and is idempotent.
func FuzzNormalizeURL(f *testing.F) {
	for _, s := range []string{"", "index.php/", "https://en.wikipedia.org/w/index.php/A", wikiPrefix + "A",
		"index.php/index.php/", "index.php//", "index.phpindex.php/", "/w/index.php?title=index.php/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, url string) {
		got := NormalizeURL(url)
		n := strings.Count(url, "index.php/")
		if strings.Contains(got, "index.php/") || len(got) != len(url)+n*(len("index.php?title=")-len("index.php/")) {
			t.Fatalf("NormalizeURL(%q) = %q", url, got)
		}
		if n == 0 && got != url {
			t.Fatalf("NormalizeURL(%q) = %q, but there is no index.php/ to rewrite", url, got)
		}
		if NormalizeURL(got) != got {
			t.Fatalf("NormalizeURL is not idempotent on %q", url)
		}
	})
}

// FuzzValidJSON: validJSON decides exactly as encoding/json.Valid.
func FuzzValidJSON(f *testing.F) {
	for _, s := range append(fuzzSeeds, `-0.5e+7`, `01`, `1.`, `"\u12"`, `"\u00e9\/"`, "\"\x01\"", `[1,]`, `{"a":1,}`,
		`[[[]]]`, strings.Repeat("[", maxDepth)+strings.Repeat("]", maxDepth), strings.Repeat("[", maxDepth+1)+strings.Repeat("]", maxDepth+1),
		` true `, `nul`, `"12345678\"12345678"`, "\"1234567\x1f\"") {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json.Valid says %v", b, got, want)
		}
	})
}
