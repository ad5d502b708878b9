// Package docstore serves rows of JSONL files without loading them into RAM: a corpus
// (row i = line i = FAISS row i, never the `id` field) and a pages file (lookup by url, as
// the ASearcher /access anchor does). Each file is mmapped read-only next to small sidecar
// files (mmapped too) built once and rebuilt when the file changes, so opening a 14 GB
// corpus costs milliseconds and RSS holds only the pages recently read.
//
// A file must not be truncated or rewritten in place while it is open: its mapping then
// faults (SIGBUS). Corpus reads catch that fault and answer an error wrapping ErrChanged
// from then on. Replace files by rename, as every tool writing large files should.
package docstore

import (
	"fmt"
)

// BadRowError says why a line of a JSONL file is not a usable row. Rows never shift: a bad
// line still has its row number, and only that row reports the error.
type BadRowError struct {
	Path   string // the JSONL file
	Line   int64  // 1-based line number (row number + 1)
	Reason string
}

func (e *BadRowError) Error() string {
	return fmt.Sprintf("%s line %d: %s", e.Path, e.Line, e.Reason)
}

// Corpus is a retrieval corpus: JSONL, one JSON object per line with a string `contents`
// field and any other fields, kept verbatim. Safe for concurrent use; Close only after
// all readers are done.
type Corpus struct {
	lines *lineFile
}

// OpenCorpus maps the corpus at path and its offsets sidecar (built first if missing or
// stale: size, mtime or the hash of its first and last 4 MiB changed).
func OpenCorpus(path string, opt Options) (*Corpus, error) {
	l, err := openLines(path, opt)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	return &Corpus{lines: l}, nil
}

// Len is the number of rows: one per line, bad lines included.
func (c *Corpus) Len() int64 { return c.lines.rows }

// Path is the corpus file; SidecarPath the offsets sidecar in use.
func (c *Corpus) Path() string        { return c.lines.path }
func (c *Corpus) SidecarPath() string { return c.lines.sidecar }

// Row returns line i (0-based) without its line ending: a read-only view into the mapping,
// valid until Close. A line that is not a JSON object with a string `contents` gives a
// *BadRowError. No allocation unless the row is bad.
func (c *Corpus) Row(i int64) ([]byte, error) {
	line, _, err := c.row(i)
	return line, err
}

// Contents returns the decoded `contents` string of row i.
func (c *Corpus) Contents(i int64) (string, error) {
	_, raw, err := c.row(i)
	if err != nil {
		return "", err
	}
	var s string
	if err := c.lines.read(func() { s = decodeJSONString(raw) }); err != nil {
		return "", err
	}
	return s, nil
}

// row returns line i and the raw (undecoded) `contents` string in it. Checking the line
// reads all of it, so a file shrunk under the mapping is an error here (ErrChanged).
func (c *Corpus) row(i int64) (line, contents []byte, err error) {
	var reason string
	if rerr := c.lines.read(func() {
		if line, err = c.lines.line(i); err == nil {
			contents, _, reason = stringField(line, "contents")
		}
	}); rerr != nil {
		return nil, nil, rerr
	}
	if err != nil {
		return nil, nil, err
	}
	if reason != "" {
		return nil, nil, &BadRowError{Path: c.lines.path, Line: i + 1, Reason: reason}
	}
	return line, contents, nil
}

// Validate checks every row (on all cores) and returns the bad ones in line order.
// progress, if set, is called from the calling goroutine with rows done and total.
func (c *Corpus) Validate(progress func(done, total int64)) ([]BadRowError, error) {
	return c.lines.validate("contents", progress)
}

// Close unmaps the corpus and its sidecar; rows returned earlier become invalid.
func (c *Corpus) Close() error { return c.lines.Close() }
