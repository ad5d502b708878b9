// Package jsonl reads JSON Lines of strings, the text input of `needle encode` and
// `needle tokenize`, with errors that name the input and the 1-based line.
package jsonl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxLine is the longest input line accepted, in bytes.
const MaxLine = 64 << 20

// Strings reads JSON Lines of strings; name and the 1-based line number go in errors.
type Strings struct {
	sc   *bufio.Scanner
	name string
	line int
}

// NewStrings reads r, called name in errors.
func NewStrings(r io.Reader, name string) *Strings {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), MaxLine)
	return &Strings{sc: sc, name: name}
}

// Open reads path, or stdin for "-". The caller closes the returned closer.
func Open(path string) (*Strings, io.Closer, error) {
	if path == "-" {
		return NewStrings(os.Stdin, "stdin"), io.NopCloser(nil), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	return NewStrings(f, path), f, nil
}

// Next returns the next text; ok is false at the end of the input.
func (t *Strings) Next() (text string, ok bool, err error) {
	if !t.sc.Scan() {
		if err := t.sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				return "", false, fmt.Errorf("%s line %d: longer than %d bytes", t.name, t.line+1, MaxLine)
			}
			return "", false, fmt.Errorf("%s line %d: %w", t.name, t.line+1, err)
		}
		return "", false, nil
	}
	t.line++
	raw := bytes.TrimSpace(t.sc.Bytes())
	if len(raw) == 0 || raw[0] != '"' {
		return "", false, fmt.Errorf("%s line %d: want a JSON string, got %.40q", t.name, t.line, raw)
	}
	if err := json.Unmarshal(raw, &text); err != nil {
		return "", false, fmt.Errorf("%s line %d: %v", t.name, t.line, err)
	}
	return text, true, nil
}

// NextN returns up to n more texts; an empty result with a nil error is the end.
func (t *Strings) NextN(n int) ([]string, error) {
	var texts []string
	for len(texts) < n {
		s, ok, err := t.Next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		texts = append(texts, s)
	}
	return texts, nil
}

// Line is the number of lines read so far.
func (t *Strings) Line() int { return t.line }
