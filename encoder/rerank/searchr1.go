package rerank

import (
	"regexp"
	"strings"
)

// PassageString is a corpus row's contents as Search-R1's reranker (rerank_server.py,
// _passage_to_string) hands it to the cross-encoder: "(Title: <first line>) <other lines>".
// The first line keeps its quotes ("(Title: "Horse") ...").
func PassageString(contents string) string {
	title, text, _ := strings.Cut(contents, "\n")
	return "(Title: " + title + ") " + text
}

// titleForm is retrieval_rerank_server.py's convert_title_format pattern.
var titleForm = regexp.MustCompile(`(?s)^\(Title:\s*([^)]+)\)\s*(.+)`)

// ConvertTitleFormat is retrieval_rerank_server.py's convert_title_format, the form of the
// documents its /retrieve answers: "(Title: T) text" becomes "\"T\"\ntext" (T keeps the
// quotes it had, so a title "Horse" comes out as ""Horse""; a title with ")" is cut there),
// anything else is returned as it is.
func ConvertTitleFormat(s string) string {
	m := titleForm.FindStringSubmatch(s)
	if m == nil {
		return s
	}
	return "\"" + m[1] + "\"\n" + m[2]
}
