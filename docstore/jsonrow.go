package docstore

import (
	"bytes"
	"encoding/binary"
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
// bytes of that string between its quotes (escapes not decoded) and their offset in line.
// reason is "" on success. One pass over line; no allocation unless a member name
// contains escapes.
func stringField(line []byte, key string) (raw []byte, at int, reason string) {
	if len(line) == 0 {
		return nil, 0, reasonEmpty
	}
	v := validator{b: line}
	v.space()
	if v.i == len(line) || line[v.i] != '{' {
		if validJSON(line) {
			return nil, 0, reasonNotObject
		}
		return nil, 0, reasonJSON
	}
	valStart, valEnd := -1, -1
	ok := v.object(func(name []byte, start, end int) {
		if jsonStringEquals(name, key) {
			valStart, valEnd = start, end
		}
	})
	if v.space(); !ok || v.i != len(line) {
		return nil, 0, reasonJSON
	}
	if v.badUTF8 {
		return nil, 0, reasonUTF8
	}
	if valStart < 0 {
		return nil, 0, "no \"" + key + "\" field"
	}
	if line[valStart] != '"' {
		return nil, 0, "\"" + key + "\" is not a string"
	}
	return line[valStart+1 : valEnd-1], valStart + 1, ""
}

// validJSON reports whether b is one JSON value with optional surrounding whitespace,
// exactly as encoding/json.Valid decides (which FuzzValidJSON checks), but several times
// faster: strings, the bulk of corpus rows, are skipped 8 bytes at a time.
func validJSON(b []byte) bool {
	v := validator{b: b}
	ok := v.value()
	v.space()
	return ok && v.i == len(b)
}

// maxDepth is encoding/json's nesting limit; deeper input is invalid there, so here too.
const maxDepth = 10000

// validator is a recursive-descent JSON syntax checker over b; i is the next byte.
// Bytes >= 0x80 are valid JSON only inside strings, where it checks that they are UTF-8
// and sets badUTF8 if not; that does not change its JSON verdict (as in encoding/json).
type validator struct {
	b       []byte
	i       int
	depth   int
	badUTF8 bool
}

func (v *validator) space() {
	for v.i < len(v.b) {
		switch v.b[v.i] {
		case ' ', '\t', '\n', '\r':
			v.i++
		default:
			return
		}
	}
}

// value checks one value, with leading whitespace, and leaves i just past it.
func (v *validator) value() bool {
	v.space()
	if v.i == len(v.b) {
		return false
	}
	switch c := v.b[v.i]; {
	case c == '{':
		return v.object(nil)
	case c == '[':
		return v.array()
	case c == '"':
		return v.string()
	case c == 't':
		return v.literal("true")
	case c == 'f':
		return v.literal("false")
	case c == 'n':
		return v.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return v.number()
	}
	return false
}

// object checks the object at i, calling member (if not nil) with each member's raw name
// (between its quotes) and the span [start, end) of its value.
func (v *validator) object(member func(name []byte, start, end int)) bool {
	closed, ok := v.enter('}')
	for ok && !closed {
		v.space()
		nameStart := v.i
		if v.i == len(v.b) || v.b[v.i] != '"' || !v.string() {
			return false
		}
		nameEnd := v.i
		if v.space(); v.i == len(v.b) || v.b[v.i] != ':' {
			return false
		}
		v.i++
		v.space()
		start := v.i
		if !v.value() {
			return false
		}
		if member != nil {
			member(v.b[nameStart+1:nameEnd-1], start, v.i)
		}
		closed, ok = v.next('}')
	}
	return ok
}

func (v *validator) array() bool {
	closed, ok := v.enter(']')
	for ok && !closed {
		if !v.value() {
			return false
		}
		closed, ok = v.next(']')
	}
	return ok
}

// enter consumes the opening byte of an object or array, and its closing byte too when it
// is empty (closed).
func (v *validator) enter(closing byte) (closed, ok bool) {
	if v.depth++; v.depth > maxDepth {
		return false, false
	}
	v.i++
	v.space()
	if v.i < len(v.b) && v.b[v.i] == closing {
		v.i++
		v.depth--
		return true, true
	}
	return false, true
}

// next consumes the ',' or the closing byte after a member or element.
func (v *validator) next(closing byte) (closed, ok bool) {
	v.space()
	if v.i < len(v.b) {
		switch v.b[v.i] {
		case ',':
			v.i++
			return false, true
		case closing:
			v.i++
			v.depth--
			return true, true
		}
	}
	return false, false
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// hasZeroByte reports whether any byte of x is 0 (exact as a yes/no answer).
func hasZeroByte(x uint64) bool { return (x-ones)&^x&highs != 0 }

// plain8 reports whether all 8 bytes of x are ASCII that neither ends nor escapes a string
// nor is a control byte: no '"', no '\\', none < 0x20 or >= 0x80.
func plain8(x uint64) bool {
	return x&highs == 0 && !hasZeroByte(x^(ones*'"')) && !hasZeroByte(x^(ones*'\\')) && (x-ones*0x20)&^x&highs == 0
}

// string checks the string whose opening quote is at i.
func (v *validator) string() bool {
	b := v.b
	i := v.i + 1
	for {
		for i+8 <= len(b) && plain8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i == len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '"':
			v.i = i + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if i+1 == len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return false
				}
				i += 6
			default:
				return false
			}
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				v.badUTF8 = true
			}
			i += size
		default:
			i++
		}
	}
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func (v *validator) literal(word string) bool {
	if string(v.b[v.i:min(len(v.b), v.i+len(word))]) != word {
		return false
	}
	v.i += len(word)
	return true
}

// number checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at i.
func (v *validator) number() bool {
	b := v.b
	if b[v.i] == '-' {
		v.i++
	}
	switch {
	case v.i < len(b) && b[v.i] == '0':
		v.i++
	case !v.digits():
		return false
	}
	if v.i < len(b) && b[v.i] == '.' {
		v.i++
		if !v.digits() {
			return false
		}
	}
	if v.i < len(b) && (b[v.i] == 'e' || b[v.i] == 'E') {
		v.i++
		if v.i < len(b) && (b[v.i] == '+' || b[v.i] == '-') {
			v.i++
		}
		if !v.digits() {
			return false
		}
	}
	return true
}

// digits consumes [0-9]+.
func (v *validator) digits() bool {
	start := v.i
	for v.i < len(v.b) && '0' <= v.b[v.i] && v.b[v.i] <= '9' {
		v.i++
	}
	return v.i > start
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
		// raw came from a line that validJSON accepted; keep the raw form rather than panic.
		return string(raw)
	}
	return s
}
