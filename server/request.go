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
func decodeObject(body []byte) (map[string]json.RawMessage, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, invalid("missing", "Field required", nil, nil)
	}
	if !utf8.Valid(body) {
		return nil, errUnparsableBody
	}
	var obj map[string]json.RawMessage
	err := json.Unmarshal(body, &obj)
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &syntax):
		return nil, invalid("json_invalid", "JSON decode error", json.RawMessage("{}"),
			map[string]any{"error": syntax.Error()}, syntax.Offset)
	case err == nil && obj == nil: // the body is JSON null
		return nil, invalid("missing", "Field required", nil, nil)
	case err != nil:
		return nil, invalid("model_attributes_type", "Input should be a valid dictionary or object to extract fields from",
			json.RawMessage(body), nil)
	}
	return obj, nil
}

// stringList validates a required field holding a list of at most maxLen strings.
func stringList(obj map[string]json.RawMessage, body []byte, field string, maxLen int) ([]string, error) {
	raw, ok := obj[field]
	if !ok {
		return nil, invalid("missing", "Field required", json.RawMessage(body), nil, field)
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil || list == nil {
		// Find the offending element for the error's loc, as pydantic does.
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil || items == nil {
			return nil, invalid("list_type", "Input should be a valid list", raw, nil, field)
		}
		for i, it := range items {
			var s string
			if json.Unmarshal(it, &s) != nil {
				return nil, invalid("string_type", "Input should be a valid string", it, nil, field, i)
			}
		}
		return nil, invalid("list_type", "Input should be a valid list", raw, nil, field)
	}
	if len(list) > maxLen {
		return nil, invalid("too_long", fmt.Sprintf("List should have at most %d items after validation, not %d", maxLen, len(list)),
			json.RawMessage("null"), map[string]any{"field_type": "List", "max_length": maxLen, "actual_length": len(list)}, field)
	}
	return list, nil
}

// parseRetrieve validates a /retrieve body like the anchor's pydantic model
// (queries: List[str]; topk: Optional[int] = None; return_scores: bool = False), in
// pydantic's lax mode (topk "5" and 5.0 are 5; return_scores 1 and "true" are true; a null
// return_scores is an error, as in the anchor). Checked side by side against FastAPI 0.115 +
// pydantic 2 running bench/anchor_server.py.
func parseRetrieve(body []byte, maxQueries int) (retrieveRequest, error) {
	var r retrieveRequest
	obj, err := decodeObject(body)
	if err != nil {
		return r, err
	}
	if r.Queries, err = stringList(obj, body, "queries", maxQueries); err != nil {
		return r, err
	}
	if raw, ok := obj["topk"]; ok && string(raw) != "null" {
		if r.TopK, err = laxInt(raw, "topk"); err != nil {
			return r, err
		}
		if r.TopK < 0 {
			return r, invalid("greater_than_equal", "Input should be greater than or equal to 0", raw, map[string]any{"ge": 0}, "topk")
		}
	}
	if raw, ok := obj["return_scores"]; ok {
		if r.ReturnScores, err = laxBool(raw, "return_scores"); err != nil {
			return r, err
		}
	}
	return r, nil
}

// parseAccess validates an /access body: {"urls": List[str]}.
func parseAccess(body []byte, maxURLs int) (accessRequest, error) {
	obj, err := decodeObject(body)
	if err != nil {
		return accessRequest{}, err
	}
	urls, err := stringList(obj, body, "urls", maxURLs)
	return accessRequest{URLs: urls}, err
}

// laxInt accepts a JSON integer, a float without a fractional part or a string holding
// an integer. Values beyond int32 saturate (topk is capped later anyway).
func laxInt(raw json.RawMessage, field string) (int, error) {
	text := string(raw)
	if s, err := strconv.Unquote(text); err == nil && raw[0] == '"' {
		text = strings.TrimSpace(s)
		if _, err := strconv.ParseFloat(text, 64); err != nil {
			return 0, invalid("int_parsing", "Input should be a valid integer, unable to parse string as an integer", raw, nil, field)
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return 0, invalid("int_type", "Input should be a valid integer", raw, nil, field)
	}
	if f != math.Trunc(f) {
		return 0, invalid("int_from_float", "Input should be a valid integer, got a number with a fractional part", raw, nil, field)
	}
	return int(max(min(f, 1<<31-1), -1<<31)), nil
}

// laxBool accepts JSON booleans, 0/1 and pydantic's boolean strings.
func laxBool(raw json.RawMessage, field string) (bool, error) {
	switch strings.ToLower(string(raw)) {
	case "true", "1", `"true"`, `"1"`, `"yes"`, `"y"`, `"on"`, `"t"`:
		return true, nil
	case "false", "0", `"false"`, `"0"`, `"no"`, `"n"`, `"off"`, `"f"`:
		return false, nil
	}
	if raw[0] == '"' {
		return false, invalid("bool_parsing", "Input should be a valid boolean, unable to interpret input", raw, nil, field)
	}
	return false, invalid("bool_type", "Input should be a valid boolean", raw, nil, field)
}
