package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// maxTextLine is the longest JSON Lines input line encode and tokenize accept, in bytes.
const maxTextLine = 64 << 20

// textLines reads JSON Lines of strings (the input of encode and tokenize); name and the
// 1-based line number go in errors.
type textLines struct {
	sc   *bufio.Scanner
	name string
	line int
}

func newTextLines(r io.Reader, name string) *textLines {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), maxTextLine)
	return &textLines{sc: sc, name: name}
}

// openTextLines reads path, or stdin for "-". The caller closes the returned closer.
func openTextLines(path string) (*textLines, io.Closer, error) {
	if path == "-" {
		return newTextLines(os.Stdin, "stdin"), io.NopCloser(nil), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	return newTextLines(f, path), f, nil
}

// nextText returns the next text; ok is false at the end of the input.
func (t *textLines) nextText() (text string, ok bool, err error) {
	if !t.sc.Scan() {
		if err := t.sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				return "", false, fmt.Errorf("%s line %d: longer than %d bytes", t.name, t.line+1, maxTextLine)
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

// next returns up to n more texts; an empty result with a nil error is the end.
func (t *textLines) next(n int) ([]string, error) {
	var texts []string
	for len(texts) < n {
		s, ok, err := t.nextText()
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
