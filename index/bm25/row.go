package bm25

import (
	"bytes"
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// rowReader reads the "id" and "contents" of corpus lines. It holds a scratch buffer: one
// per goroutine.
type rowReader struct {
	buf []byte
}

// read returns line's id as pyserini reads it (a JSON string's text, else the raw JSON; nil
// when absent) and its contents; ok is false for a line that is not a JSON object with a
// string "contents". id and contents are valid until the next call.
//
// The common line (an object of string values) is read by scanRow; any other goes through
// encoding/json, whose reading scanRow matches: json.Unmarshal of each row and its copy of the
// contents took 15% of a build's CPU (500,000 rows, docs/measurements/2026-11-28-bm25-build.md).
func (r *rowReader) read(line []byte) (id []byte, contents string, ok bool) {
	var idSpan, textSpan span
	if r.buf, idSpan, textSpan, ok = scanRow(line, r.buf[:0]); ok {
		if textSpan.start < 0 {
			return idSpan.of(r.buf), "", false
		}
		// a view of buf, which is not written again until the next call
		text := r.buf[textSpan.start:textSpan.end]
		return idSpan.of(r.buf), unsafe.String(unsafe.SliceData(text), len(text)), true
	}
	return unmarshalRow(line)
}

// unmarshalRow is read by encoding/json: every line's reading before scanRow, and the
// reference scanRow is tested against.
func unmarshalRow(line []byte) (id []byte, contents string, ok bool) {
	var row struct {
		ID       json.RawMessage `json:"id"`
		Contents *string         `json:"contents"`
	}
	if json.Unmarshal(line, &row) != nil || row.Contents == nil {
		return idString(row.ID), "", false
	}
	return idString(row.ID), *row.Contents, true
}

// idString is a row's "id" as pyserini reads it: a JSON string's text, else the raw JSON.
func idString(raw json.RawMessage) []byte {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return []byte(s)
	}
	return raw
}

// span is a decoded field's bytes in scanRow's buffer; start -1: the field is absent.
type span struct{ start, end int }

func (s span) of(buf []byte) []byte {
	if s.start < 0 {
		return nil
	}
	return buf[s.start:s.end]
}

// scanRow reads line when it is a JSON object whose values are all strings, its keys ASCII
// without escapes, "id" and "contents" at most once each, every \u escape outside the
// surrogates and the line valid UTF-8: it appends the decoded id and contents to buf and
// returns their spans. Otherwise ok is false and the line is left to encoding/json, which
// alone handles the rest (keys matched case-insensitively, the last duplicate winning,
// U+FFFD for bad UTF-8 and lone surrogates, non-string values, invalid JSON).
func scanRow(line, buf []byte) (out []byte, id, contents span, ok bool) {
	id, contents = span{-1, -1}, span{-1, -1}
	if !utf8.Valid(line) {
		return buf, id, contents, false
	}
	i := skipSpace(line, 0)
	if i == len(line) || line[i] != '{' {
		return buf, id, contents, false
	}
	i = skipSpace(line, i+1)
	if i < len(line) && line[i] == '}' {
		return buf, id, contents, skipSpace(line, i+1) == len(line)
	}
	for {
		if i == len(line) || line[i] != '"' {
			return buf, id, contents, false
		}
		j := i + 1
		for j < len(line) && line[j] >= 0x20 && line[j] < utf8.RuneSelf && line[j] != '"' && line[j] != '\\' {
			j++
		}
		if j == len(line) || line[j] != '"' {
			return buf, id, contents, false
		}
		var field *span
		switch key := line[i+1 : j]; {
		case string(key) == "id":
			field = &id
		case string(key) == "contents":
			field = &contents
		case bytes.EqualFold(key, []byte("id")), bytes.EqualFold(key, []byte("contents")):
			return buf, id, contents, false
		}
		if field != nil && field.start >= 0 {
			return buf, id, contents, false
		}
		i = skipSpace(line, j+1)
		if i == len(line) || line[i] != ':' {
			return buf, id, contents, false
		}
		start := len(buf)
		if buf, i, ok = unquote(line, skipSpace(line, i+1), buf); !ok {
			return buf, id, contents, false
		}
		if field != nil {
			*field = span{start, len(buf)}
		} else {
			buf = buf[:start]
		}
		if i = skipSpace(line, i); i == len(line) {
			return buf, id, contents, false
		}
		if line[i] == '}' {
			return buf, id, contents, skipSpace(line, i+1) == len(line)
		}
		if line[i] != ',' {
			return buf, id, contents, false
		}
		i = skipSpace(line, i+1)
	}
}

// skipSpace returns the index of the first byte at or after i that is not JSON whitespace.
func skipSpace(s []byte, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// unquote appends the text of the JSON string at s[i:] to buf and returns the index after
// its closing quote; ok is false when s[i:] is not a string scanRow reads.
func unquote(s []byte, i int, buf []byte) (out []byte, end int, ok bool) {
	if i == len(s) || s[i] != '"' {
		return buf, i, false
	}
	i++
	for {
		j := i
		for j < len(s) && s[j] != '"' && s[j] != '\\' && s[j] >= 0x20 {
			j++
		}
		buf = append(buf, s[i:j]...)
		if j == len(s) || s[j] < 0x20 {
			return buf, j, false
		}
		if s[j] == '"' {
			return buf, j + 1, true
		}
		if j+1 == len(s) {
			return buf, j, false
		}
		switch c := s[j+1]; c {
		case '"', '\\', '/':
			buf = append(buf, c)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, good := hex4(s[j+2:])
			if !good || utf16.IsSurrogate(r) {
				return buf, j, false
			}
			buf = utf8.AppendRune(buf, r)
			j += 4
		default:
			return buf, j, false
		}
		i = j + 2
	}
}

// hex4 decodes the 4 hex digits at the start of s.
func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
