package docstore

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Reasons a row is bad. They are constants so that reporting millions of bad rows
// allocates no strings.
const (
	reasonEmpty     = "empty line"
	reasonUTF8      = "invalid UTF-8"
	reasonJSON      = "not valid JSON"
	reasonNotObject = "not a JSON object"
)

// stringField checks that line is one JSON object whose member key is a string, as Python's
// json.loads(line)[key] would see it (the last of duplicate keys wins), and returns the raw
// bytes of that string between its quotes (escapes not decoded) and its offset in line.
// reason is "" on success. It does not allocate unless a member name contains escapes.
func stringField(line []byte, key string) (raw []byte, at int, reason string) {
	switch {
	case len(line) == 0:
		return nil, 0, reasonEmpty
	case !utf8.Valid(line):
		return nil, 0, reasonUTF8
	case !json.Valid(line):
		return nil, 0, reasonJSON
	}
	i := skipSpace(line, 0)
	if line[i] != '{' {
		return nil, 0, reasonNotObject
	}
	valStart, valEnd := -1, -1
	i = skipSpace(line, i+1)
	for line[i] != '}' {
		// line is valid JSON, so a member is: "name" ws : ws value ws [,]
		nameEnd := skipString(line, i)
		name := line[i+1 : nameEnd-1]
		i = skipSpace(line, nameEnd)
		i = skipSpace(line, i+1) // past ':'
		end := skipValue(line, i)
		if jsonStringEquals(name, key) {
			valStart, valEnd = i, end
		}
		i = skipSpace(line, end)
		if line[i] == ',' {
			i = skipSpace(line, i+1)
		}
	}
	if valStart < 0 {
		return nil, 0, "no \"" + key + "\" field"
	}
	if line[valStart] != '"' {
		return nil, 0, "\"" + key + "\" is not a string"
	}
	return line[valStart+1 : valEnd-1], valStart + 1, ""
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string that starts with the quote at b[i].
// b must be valid JSON.
func skipString(b []byte, i int) int {
	i++
	for {
		j := bytes.IndexAny(b[i:], "\"\\")
		i += j
		if b[i] == '"' {
			return i + 1
		}
		i += 2 // a backslash and the byte it escapes
	}
}

// skipValue returns the index just past the JSON value starting at b[i]. b must be valid JSON.
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	default: // number, true, false, null
		for i < len(b) && isScalarByte(b[i]) {
			i++
		}
		return i
	}
}

// isScalarByte reports whether c can occur in a JSON number or literal (true, false, null).
func isScalarByte(c byte) bool {
	return c == '-' || c == '+' || c == '.' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// jsonStringEquals reports whether the raw JSON string contents raw (between the quotes)
// decode to s. Only raw strings with escapes are decoded (allocating); they are rare.
func jsonStringEquals(raw []byte, s string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == s
	}
	return decodeJSONString(raw) == s
}

// decodeJSONString decodes the contents of a valid JSON string literal (without its quotes).
func decodeJSONString(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw)
	}
	quoted := make([]byte, 0, len(raw)+2)
	quoted = append(append(append(quoted, '"'), raw...), '"')
	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		// raw came from a line that json.Valid accepted; keep the raw form rather than panic.
		return string(raw)
	}
	return s
}
