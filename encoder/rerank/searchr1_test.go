package rerank

import "testing"

// The wants are what Search-R1's own functions (rerank_server.py's _passage_to_string, then
// retrieval_rerank_server.py's convert_title_format, run in Python 3.11) return for the
// same contents.
func TestSearchR1Forms(t *testing.T) {
	for _, c := range []struct{ contents, passage, document string }{
		{"\"Horse\"\nan animal\nsecond line", "(Title: \"Horse\") an animal\nsecond line", "\"\"Horse\"\"\nan animal\nsecond line"},
		{"\"Foo (bar)\"\ntext", "(Title: \"Foo (bar)\") text", "\"\"Foo (bar\"\n\") text"},
		{"no newline", "(Title: no newline) ", "\"no newline\"\n "},
		{"", "(Title: ) ", "\" \"\n "},
	} {
		p := PassageString(c.contents)
		if p != c.passage {
			t.Errorf("PassageString(%q) = %q, want %q", c.contents, p, c.passage)
		}
		if d := ConvertTitleFormat(p); d != c.document {
			t.Errorf("ConvertTitleFormat(%q) = %q, want %q", p, d, c.document)
		}
	}
}
