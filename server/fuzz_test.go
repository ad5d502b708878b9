package server

import (
	"encoding/json"
	"testing"
)

// checkAnswer holds for every request body: a 200 with the contract's shape or a 4xx with
// a JSON "detail", never a 5xx or invalid JSON.
func checkAnswer(t *testing.T, code int, out []byte, shape any) {
	t.Helper()
	if !json.Valid(out) {
		t.Fatalf("status %d: invalid JSON %q", code, out)
	}
	switch {
	case code == 200:
		if err := json.Unmarshal(out, shape); err != nil {
			t.Fatalf("200 body %s does not fit the contract: %v", out, err)
		}
	case code >= 400 && code < 500:
		var d struct{ Detail json.RawMessage }
		if json.Unmarshal(out, &d) != nil || d.Detail == nil {
			t.Fatalf("status %d without a detail: %s", code, out)
		}
	default:
		t.Fatalf("status %d for a client's body: %s", code, out)
	}
}

func FuzzRetrieve(f *testing.F) {
	for _, seed := range []string{
		`{"queries":["q1","q2"],"topk":3,"return_scores":true}`,
		`{"queries":["q"],"topk":5,"return_scores":false}`,
		`{"queries":[""],"topk":null}`, `{"queries":[]}`, `{"topk":3}`, `{"queries":"q"}`,
		`{"queries":["a"],"topk":-5}`, `{"queries":["a"],"topk":1e400}`, `{"queries":["a"],"topk":"12"}`,
		`{"queries":["a"],"return_scores":"yes"}`, "{\"queries\":[\"\xc3\x28\"]}", `[]`, `nul`, ``,
		`{"queries":["\u0000\ud800"],"topk":99999999999999999999}`,
		`{"queries":["a",null]}`, `{"queries":[null, 5]}`, `   `, `{"queries":["a"]} x`,
		`{"queries":["a"],"topk":"5_000"}`, `{"queries":["a"],"topk":true}`, `{"queries":["a"],"return_scores":2.0}`,
	} {
		f.Add([]byte(seed), "")
	}
	for _, ct := range []string{"application/json", "text/plain", "application/x-www-form-urlencoded", "application/vnd.api+json", "APPLICATION/JSON; charset=utf-8", "json"} {
		f.Add([]byte(`{"queries":["q1"],"topk":2}`), ct)
	}
	s, _, _ := testServer(f, Config{MaxQueries: 64}, false)
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		code, out, _ := do(s, "POST", "/retrieve", string(body), "Content-Type", contentType)
		var shape struct {
			Result [][]json.RawMessage `json:"result"`
		}
		checkAnswer(t, code, out, &shape)
		if code == 200 {
			req, err := parseRetrieve([]byte(contentType), body, 64)
			if err != nil || len(shape.Result) != len(req.Queries) {
				t.Fatalf("200 with %d result lists for body %q (parse error %v)", len(shape.Result), body, err)
			}
		}
	})
}

func FuzzAccess(f *testing.F) {
	for _, seed := range []string{
		`{"urls":["https://en.wikipedia.org/w/index.php/Beveridge,%20Victoria"]}`,
		`{"urls":[]}`, `{"urls":[1]}`, `{"urls":"x"}`, `{}`, `{"urls":["a","b",null]}`,
		`{"urls":[null]}`, `{"urls":["a","null"]}`,
	} {
		f.Add([]byte(seed))
	}
	s, _, _ := testServer(f, Config{MaxQueries: 64}, true)
	f.Fuzz(func(t *testing.T, body []byte) {
		code, out, _ := do(s, "POST", "/access", string(body))
		var shape struct {
			Result []json.RawMessage `json:"result"`
		}
		checkAnswer(t, code, out, &shape)
	})
}
