package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// detail is one entry of FastAPI's 422 body {"detail": [...]} (pydantic v2 ErrorDetails):
// the clients' error handling and logs expect this shape, in this key order.
type detail struct {
	Type  string          `json:"type"`
	Loc   []any           `json:"loc"`
	Msg   string          `json:"msg"`
	Input json.RawMessage `json:"input"`
	Ctx   map[string]any  `json:"ctx,omitempty"`
}

// errUnparsableBody is FastAPI's answer (400) to a body that is not UTF-8 text.
var errUnparsableBody = errors.New("There was an error parsing the body")

// validationError is a client mistake in a request body, answered with 422.
type validationError struct{ details []detail }

func (e *validationError) Error() string {
	d := e.details[0]
	return fmt.Sprintf("%s at %v: %s", d.Type, d.Loc, d.Msg)
}

func invalid(typ, msg string, input json.RawMessage, ctx map[string]any, loc ...any) *validationError {
	if input == nil {
		input = json.RawMessage("null")
	}
	return &validationError{[]detail{{Type: typ, Loc: append([]any{"body"}, loc...), Msg: msg, Input: input, Ctx: ctx}}}
}

// marshalJSON encodes v as Python's json.dumps does for FastAPI's bodies: '<', '>' and
// '&' stay as they are (encoding/json's Marshal would escape them).
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), err
}

// retrieveRequest is POST /retrieve after validation. TopK 0 means the server default.
type retrieveRequest struct {
	Queries      []string
	TopK         int
	ReturnScores bool
}

// accessRequest is POST /access after validation.
type accessRequest struct {
	URLs []string
}

// decodeObject parses body as a JSON object, with FastAPI's errors for what is not one.
// FastAPI parses the body as JSON only when the Content-Type is absent, application/json
// or application/*+json (fastapi/routing.py, get_request_handler); any other body reaches
// pydantic as a string, which is not an object.
func decodeObject(contentType, body []byte) (map[string]json.RawMessage, error) {
	if len(body) == 0 {
		return nil, invalid("missing", "Field required", nil, nil)
	}
	if !utf8.Valid(body) {
		return nil, errUnparsableBody
	}
	if !isJSONContentType(contentType) {
		text, _ := marshalJSON(string(body)) // a string always encodes
		return nil, invalid("model_attributes_type", "Input should be a valid dictionary or object to extract fields from", text, nil)
	}
	var obj map[string]json.RawMessage
	err := json.Unmarshal(body, &obj)
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &syntax):
		// Python's json names the index of the offending character, encoding/json the
		// count of bytes read including it; at the end of the input both name its length.
		pos := syntax.Offset
		if pos < int64(len(body)) || !strings.HasPrefix(syntax.Error(), "unexpected end") {
			pos--
		}
		return nil, invalid("json_invalid", "JSON decode error", json.RawMessage("{}"),
			map[string]any{"error": syntax.Error()}, pos)
	case err == nil && obj == nil: // the body is JSON null
		return nil, invalid("missing", "Field required", nil, nil)
	case err != nil:
		return nil, invalid("model_attributes_type", "Input should be a valid dictionary or object to extract fields from",
			json.RawMessage(body), nil)
	}
	return obj, nil
}

// isJSONContentType says whether FastAPI would parse a body with this Content-Type as
// JSON: none, or main type application with subtype json or *+json, case-insensitive,
// parameters ignored (as Python's email.message.Message reads the header).
func isJSONContentType(contentType []byte) bool {
	ct := strings.ToLower(strings.TrimSpace(string(contentType)))
	if ct == "" {
		return true
	}
	ct, _, _ = strings.Cut(ct, ";")
	main, sub, ok := strings.Cut(strings.TrimSpace(ct), "/")
	return ok && main == "application" && !strings.Contains(sub, "/") && (sub == "json" || strings.HasSuffix(sub, "+json"))
}

// stringList validates a required field holding a list of at most maxLen strings.
func stringList(obj map[string]json.RawMessage, body []byte, field string, maxLen int) ([]string, error) {
	raw, ok := obj[field]
	if !ok {
		return nil, invalid("missing", "Field required", json.RawMessage(body), nil, field)
	}
	var list []string
	err := json.Unmarshal(raw, &list)
	// encoding/json reads a null item as "" where pydantic refuses it, so a list that may
	// hold one is checked item by item ("null" inside a string only costs that check).
	if err != nil || list == nil || bytes.Contains(raw, []byte("null")) {
		if err := checkStringItems(raw, field); err != nil {
			return nil, err
		}
	}
	if len(list) > maxLen {
		return nil, invalid("too_long", fmt.Sprintf("List should have at most %d items after validation, not %d", maxLen, len(list)),
			json.RawMessage("null"), map[string]any{"field_type": "List", "max_length": maxLen, "actual_length": len(list)}, field)
	}
	return list, nil
}

// checkStringItems refuses, as pydantic does, a JSON value that is not a list, and
// names every item of a list that is not a string.
func checkStringItems(raw json.RawMessage, field string) error {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil || items == nil {
		return invalid("list_type", "Input should be a valid list", raw, nil, field)
	}
	var bad []detail
	for i, it := range items {
		if it[0] != '"' { // json.Unmarshal hands each item over without its surrounding space
			bad = append(bad, invalid("string_type", "Input should be a valid string", it, nil, field, i).details[0])
		}
	}
	if bad != nil {
		return &validationError{bad}
	}
	return nil
}

// parseRetrieve validates a /retrieve body like the anchor's pydantic model
// (queries: List[str]; topk: Optional[int] = None; return_scores: bool = False), in
// pydantic's lax mode (topk "5" and 5.0 are 5; return_scores 1 and "true" are true; a null
// return_scores is an error, as in the anchor). Checked side by side against FastAPI 0.115 +
// pydantic 2 running bench/anchor_server.py.
func parseRetrieve(contentType, body []byte, maxQueries int) (retrieveRequest, error) {
	var r retrieveRequest
	obj, err := decodeObject(contentType, body)
	if err != nil {
		return r, err
	}
	// pydantic reports every field's errors, in the model's field order.
	var details []detail
	keep := func(err error) {
		if v, ok := err.(*validationError); ok { // the field checks return no other errors
			details = append(details, v.details...)
		}
	}
	r.Queries, err = stringList(obj, body, "queries", maxQueries)
	keep(err)
	if raw, ok := obj["topk"]; ok && string(raw) != "null" {
		r.TopK, err = laxInt(raw, "topk")
		if err == nil && r.TopK < 0 {
			err = invalid("greater_than_equal", "Input should be greater than or equal to 0", raw, map[string]any{"ge": 0}, "topk")
		}
		keep(err)
	}
	if raw, ok := obj["return_scores"]; ok {
		r.ReturnScores, err = laxBool(raw, "return_scores")
		keep(err)
	}
	if details != nil {
		return retrieveRequest{}, &validationError{details}
	}
	return r, nil
}

// parseAccess validates an /access body: {"urls": List[str]}.
func parseAccess(contentType, body []byte, maxURLs int) (accessRequest, error) {
	obj, err := decodeObject(contentType, body)
	if err != nil {
		return accessRequest{}, err
	}
	urls, err := stringList(obj, body, "urls", maxURLs)
	return accessRequest{URLs: urls}, err
}

// laxInt accepts what pydantic's lax int does: a JSON integer, a float without a
// fractional part, true/false (1/0) and a string holding an integer (space around it,
// "_" between digits and a ".0" fraction allowed). Values beyond int32 saturate (topk is
// capped later anyway).
func laxInt(raw json.RawMessage, field string) (int, error) {
	switch string(raw) {
	case "true":
		return 1, nil
	case "false":
		return 0, nil
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s) // raw is a valid JSON string: the object holding it parsed
		if n, ok := parseIntString(s); ok {
			return n, nil
		}
		return 0, invalid("int_parsing", "Input should be a valid integer, unable to parse string as an integer", raw, nil, field)
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return 0, invalid("int_type", "Input should be a valid integer", raw, nil, field)
	}
	if f != math.Trunc(f) {
		return 0, invalid("int_from_float", "Input should be a valid integer, got a number with a fractional part", raw, nil, field)
	}
	return saturate(f), nil
}

// parseIntString reads an integer as pydantic does from a string: "5", " -5 ", "5_000", "5.00".
func parseIntString(s string) (int, bool) {
	s = strings.TrimSpace(s)
	if whole, frac, ok := strings.Cut(s, "."); ok {
		if frac == "" || strings.Trim(frac, "0") != "" {
			return 0, false
		}
		s = whole
	}
	digits := strings.TrimLeft(s, "+-")
	if len(s)-len(digits) > 1 || digits == "" || digits[0] == '_' || digits[len(digits)-1] == '_' || strings.Contains(digits, "__") {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if err != nil || strings.ContainsAny(digits, "eEiInN.xX") {
		return 0, false
	}
	return saturate(f), true
}

func saturate(f float64) int { return int(max(min(f, 1<<31-1), -1<<31)) }

// laxBool accepts what pydantic's lax bool does: JSON booleans, the numbers 0 and 1 and
// its boolean words in any case. Other whole numbers and other strings are bool_parsing
// errors, everything else bool_type.
func laxBool(raw json.RawMessage, field string) (bool, error) {
	switch raw[0] {
	case 't', 'f':
		return raw[0] == 't', nil
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s) // raw is a valid JSON string: the object holding it parsed
		switch strings.ToLower(s) {
		case "true", "1", "yes", "y", "on", "t":
			return true, nil
		case "false", "0", "no", "n", "off", "f":
			return false, nil
		}
		return false, invalid("bool_parsing", "Input should be a valid boolean, unable to interpret input", raw, nil, field)
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	switch {
	case err == nil && (f == 0 || f == 1):
		return f == 1, nil
	case err == nil && f == math.Trunc(f):
		return false, invalid("bool_parsing", "Input should be a valid boolean, unable to interpret input", raw, nil, field)
	}
	return false, invalid("bool_type", "Input should be a valid boolean", raw, nil, field)
}
