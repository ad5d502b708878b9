package server

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"

	"needle/docstore"
	"needle/engine"
	"needle/internal/option"
	"needle/testkit/enginetest"
)

// testParts are 50 fake documents, their index and encoder.
func testParts() (*enginetest.HashEncoder, *enginetest.Docs, *enginetest.FlatIndex) {
	enc := &enginetest.HashEncoder{Dimension: 16}
	texts := make([]string, 50)
	for i := range texts {
		texts[i] = fmt.Sprintf("title%d about topic%d and word%d", i, i%5, i%11)
	}
	docs, idx := enginetest.Corpus(enc, texts)
	return enc, docs, idx
}

// serveParts makes s ready with a Retriever over the parts (pages may be nil).
func serveParts(t testing.TB, s *Server, enc engine.Encoder, idx engine.Index, docs engine.DocStore, pages engine.PageStore) {
	t.Helper()
	r, err := engine.NewRetriever(enc, idx, docs, pages, "query: ", enginetest.Batcher(engine.BatcherOptions{MaxBatch: 8, OnBatch: s.ObserveBatch}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	s.SetRetriever(r)
}

// newServer is New of cfg with the defaults for the limits cfg leaves zero (a test sets the
// ones it is about); LoadWait stays as given: 0 answers at once.
func newServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	d := option.Defaults[Config]()
	for _, f := range []struct{ v, d *int }{{&cfg.DefaultTopK, &d.DefaultTopK}, {&cfg.MaxTopK, &d.MaxTopK}, {&cfg.MaxQueries, &d.MaxQueries},
		{&cfg.MaxBodyBytes, &d.MaxBodyBytes}, {&cfg.MaxHits, &d.MaxHits}, {&cfg.MaxConns, &d.MaxConns}} {
		*f.v = cmp.Or(*f.v, *f.d)
	}
	cfg.ReadTimeout = cmp.Or(cfg.ReadTimeout, d.ReadTimeout)
	cfg.WriteTimeout = cmp.Or(cfg.WriteTimeout, d.WriteTimeout)
	cfg.IdleTimeout = cmp.Or(cfg.IdleTimeout, d.IdleTimeout)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testServer serves the testParts; pages enables /access.
func testServer(t testing.TB, cfg Config, pages bool) (*Server, *enginetest.HashEncoder, *enginetest.FlatIndex) {
	t.Helper()
	enc, docs, idx := testParts()
	var ps engine.PageStore
	if pages {
		ps = enginetest.Pages{"https://en.wikipedia.org/w/index.php?title=Beveridge,%20Victoria": `{"url":"https://en.wikipedia.org/w/index.php?title=Beveridge,%20Victoria","contents":"Beveridge is a town"}`}
	}
	s := newServer(t, cfg)
	serveParts(t, s, enc, idx, docs, ps)
	return s, enc, idx
}

// do runs one request through the handler in memory.
func do(s *Server, method, path, body string, header ...string) (int, []byte, *fasthttp.Response) {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	req.SetBodyString(body)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, nil, nil)
	s.Handler(&ctx)
	resp := &fasthttp.Response{}
	ctx.Response.CopyTo(resp)
	return resp.StatusCode(), resp.Body(), resp
}

type scoredHit struct {
	Document map[string]any `json:"document"`
	Score    float64        `json:"score"`
}

func TestRetrieveReturnScoresMatchesDirectSearch(t *testing.T) {
	s, enc, idx := testServer(t, Config{}, false)
	queries := []string{"topic1 word3", "title7", "", "nothing matches"}
	body, _ := json.Marshal(map[string]any{"queries": queries, "topk": 4, "return_scores": true})
	code, out, _ := do(s, "POST", "/retrieve", string(body))
	if code != 200 {
		t.Fatalf("status %d: %s", code, out)
	}
	var got struct{ Result [][]scoredHit }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("invalid JSON %s: %v", out, err)
	}
	if len(got.Result) != len(queries) {
		t.Fatalf("%d result lists for %d queries", len(got.Result), len(queries))
	}
	vecs, _ := enc.Encode(queries, "query: ")
	dist, labels := make([]float32, 4*len(queries)), make([]int64, 4*len(queries))
	if err := idx.Search(vecs, 4, dist, labels); err != nil {
		t.Fatal(err)
	}
	for q, hits := range got.Result {
		if len(hits) != 4 {
			t.Fatalf("query %d: %d hits, want 4", q, len(hits))
		}
		for j, h := range hits {
			want := labels[q*4+j]
			if h.Document["id"] != fmt.Sprint(want) || h.Document["url"] == nil || h.Document["contents"] == nil {
				t.Errorf("query %d hit %d: document %v, want row %d with id, contents, url", q, j, h.Document, want)
			}
			if h.Score != float64(dist[q*4+j]) {
				t.Errorf("query %d hit %d: score %v, want %v", q, j, h.Score, dist[q*4+j])
			}
		}
	}
}

func TestRetrieveWithoutScoresReturnsRows(t *testing.T) {
	s, _, _ := testServer(t, Config{}, false)
	code, out, _ := do(s, "POST", "/retrieve", `{"queries":["topic2"],"topk":5,"return_scores":false}`)
	if code != 200 {
		t.Fatalf("status %d: %s", code, out)
	}
	var got struct{ Result [][]map[string]any }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Result) != 1 || len(got.Result[0]) != 5 {
		t.Fatalf("result %s, want 1 list of 5 rows", out)
	}
	for _, row := range got.Result[0] {
		if row["contents"] == nil || row["url"] == nil || row["id"] == nil {
			t.Errorf("row %v lacks id/contents/url", row)
		}
	}
}

func TestRetrieveTopK(t *testing.T) {
	s, _, _ := testServer(t, Config{DefaultTopK: 3, MaxTopK: 20}, false)
	for _, tc := range []struct {
		topk string
		want int
	}{{"", 3}, {`,"topk":null`, 3}, {`,"topk":0`, 3}, {`,"topk":1`, 1}, {`,"topk":"2"`, 2}, {`,"topk":7.0`, 7},
		{`,"topk":100`, 20}, {`,"topk":1e9`, 20}} {
		code, out, _ := do(s, "POST", "/retrieve", `{"queries":["a","b"]`+tc.topk+`}`)
		var got struct{ Result [][]map[string]any }
		if code != 200 || json.Unmarshal(out, &got) != nil {
			t.Fatalf("topk %q: status %d %s", tc.topk, code, out)
		}
		for _, hits := range got.Result {
			if len(hits) != tc.want {
				t.Errorf("topk %q: %d hits, want %d", tc.topk, len(hits), tc.want)
			}
		}
	}
	// Capped by the index size too.
	s2, _, _ := testServer(t, Config{MaxTopK: 1000}, false)
	_, out, _ := do(s2, "POST", "/retrieve", `{"queries":["a"],"topk":999}`)
	var got struct{ Result [][]map[string]any }
	if json.Unmarshal(out, &got) != nil || len(got.Result[0]) != 50 {
		t.Errorf("topk 999 over 50 rows: %s", out)
	}
}

func TestRetrieveHitsLimit(t *testing.T) {
	s, _, _ := testServer(t, Config{MaxHits: 10}, false)
	if code, out, _ := do(s, "POST", "/retrieve", `{"queries":["a","b"],"topk":5}`); code != 200 {
		t.Errorf("10 hits: %d %s", code, out)
	}
	code, out, _ := do(s, "POST", "/retrieve", `{"queries":["a","b","c"],"topk":4}`)
	if code != 422 || !strings.Contains(string(out), `"type":"value_error","loc":["body","topk"]`) || !strings.Contains(string(out), "12 hits") {
		t.Errorf("12 hits over a limit of 10: %d %s", code, out)
	}
}

func TestRetrieveEmptyQueryList(t *testing.T) {
	s, _, _ := testServer(t, Config{}, false)
	code, out, _ := do(s, "POST", "/retrieve", `{"queries":[],"return_scores":true}`)
	if code != 200 || string(out) != `{"result":[]}` {
		t.Errorf("got %d %s, want 200 {\"result\":[]}", code, out)
	}
}

func TestRetrieveValidationErrors(t *testing.T) {
	s, _, _ := testServer(t, Config{MaxQueries: 3}, false)
	for _, tc := range []struct {
		body, typ, loc string
		code           int
	}{
		{``, "missing", `["body"]`, 422},
		{`{"queries": [`, "json_invalid", `["body",13]`, 422},
		{`[1,2]`, "model_attributes_type", `["body"]`, 422},
		{`"x"`, "model_attributes_type", `["body"]`, 422},
		{`null`, "missing", `["body"]`, 422},
		{`{"queries":["a"],"return_scores":null}`, "bool_type", `["body","return_scores"]`, 422},
		{`{"topk":3}`, "missing", `["body","queries"]`, 422},
		{`{"queries":"q"}`, "list_type", `["body","queries"]`, 422},
		{`{"queries":null}`, "list_type", `["body","queries"]`, 422},
		{`{"queries":["a",5]}`, "string_type", `["body","queries",1]`, 422},
		{`{"queries":["a"],"topk":-1}`, "greater_than_equal", `["body","topk"]`, 422},
		{`{"queries":["a"],"topk":2.5}`, "int_from_float", `["body","topk"]`, 422},
		{`{"queries":["a"],"topk":"x"}`, "int_parsing", `["body","topk"]`, 422},
		{`{"queries":["a"],"topk":[1]}`, "int_type", `["body","topk"]`, 422},
		{`{"queries":["a"],"return_scores":"maybe"}`, "bool_parsing", `["body","return_scores"]`, 422},
		{`{"queries":["a"],"return_scores":{}}`, "bool_type", `["body","return_scores"]`, 422},
		{`{"queries":["a","b","c","d"]}`, "too_long", `["body","queries"]`, 422},
		{`{"queries":["a",null]}`, "string_type", `["body","queries",1]`, 422},
		{`{"queries":{"a":1}}`, "list_type", `["body","queries"]`, 422},
		{`   `, "json_invalid", `["body",3]`, 422},
		{`{"queries":["a"]} x`, "json_invalid", `["body",18]`, 422},
		{`{"queries":["a"],"topk":}`, "json_invalid", `["body",24]`, 422},
		{`{"queries":["a"],"topk":"5.5"}`, "int_parsing", `["body","topk"]`, 422},
		{`{"queries":["a"],"topk":"1e2"}`, "int_parsing", `["body","topk"]`, 422},
		{`{"queries":["a"],"topk":"5."}`, "int_parsing", `["body","topk"]`, 422},
		{`{"queries":["a"],"topk":{}}`, "int_type", `["body","topk"]`, 422},
		{`{"queries":["a"],"return_scores":2}`, "bool_parsing", `["body","return_scores"]`, 422},
		{`{"queries":["a"],"return_scores":-1}`, "bool_parsing", `["body","return_scores"]`, 422},
		{`{"queries":["a"],"return_scores":2.0}`, "bool_parsing", `["body","return_scores"]`, 422},
		{`{"queries":["a"],"return_scores":1.5}`, "bool_type", `["body","return_scores"]`, 422},
		{`{"queries":["a"],"return_scores":" true "}`, "bool_parsing", `["body","return_scores"]`, 422},
		{`{"queries":["a"],"return_scores":"1.0"}`, "bool_parsing", `["body","return_scores"]`, 422},
		{`{"queries":["a"],"return_scores":[]}`, "bool_type", `["body","return_scores"]`, 422},
	} {
		code, out, _ := do(s, "POST", "/retrieve", tc.body)
		var got struct {
			Detail []struct {
				Type  string
				Loc   json.RawMessage
				Msg   string
				Input json.RawMessage
			}
		}
		if code != tc.code || json.Unmarshal(out, &got) != nil || len(got.Detail) != 1 {
			t.Errorf("body %q: got %d %s, want %d with one detail", tc.body, code, out, tc.code)
			continue
		}
		d := got.Detail[0]
		if d.Type != tc.typ || string(d.Loc) != tc.loc || d.Msg == "" || d.Input == nil {
			t.Errorf("body %q: detail %s, want type %s loc %s", tc.body, out, tc.typ, tc.loc)
		}
	}
}

func TestNonUTF8BodyIs400(t *testing.T) {
	s, _, _ := testServer(t, Config{}, false)
	code, out, _ := do(s, "POST", "/retrieve", "{\"queries\":[\"\xff\"]}")
	if want := `{"detail":"There was an error parsing the body"}`; code != 400 || string(out) != want {
		t.Errorf("got %d %s, want 400 %s (FastAPI's answer)", code, out, want)
	}
}

// The exact bytes of a FastAPI 422 for a missing field, key order included.
func TestMissingQueriesMatchesFastAPIShape(t *testing.T) {
	s, _, _ := testServer(t, Config{}, false)
	_, out, _ := do(s, "POST", "/retrieve", `{"topk":3}`)
	want := `{"detail":[{"type":"missing","loc":["body","queries"],"msg":"Field required","input":{"topk":3}}]}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}

// Lax values FastAPI 0.115.5 + pydantic 2 accept for the anchor's model (seen side by side).
func TestRetrieveLaxValuesAccepted(t *testing.T) {
	s, _, _ := testServer(t, Config{}, false)
	for _, body := range []string{
		`{"queries":["a"],"topk":true}`, `{"queries":["a"],"topk":false}`, `{"queries":["a"],"topk":"5.0"}`,
		`{"queries":["a"],"topk":" 5 "}`, `{"queries":["a"],"topk":"+5"}`, `{"queries":["a"],"topk":"5_000"}`,
		`{"queries":["a"],"topk":"-0"}`, `{"queries":["a"],"topk":1e2}`, `{"queries":["a"],"topk":5.0}`,
		`{"queries":["a"],"return_scores":1.0}`, `{"queries":["a"],"return_scores":0.0}`, `{"queries":["a"],"return_scores":1e0}`,
		`{"queries":["a"],"return_scores":"True"}`, ` {"queries":["a"]}`,
	} {
		if code, out, _ := do(s, "POST", "/retrieve", body); code != 200 {
			t.Errorf("body %s: got %d %s, want 200", body, code, out)
		}
	}
}

// The exact bytes FastAPI 0.115.5 + pydantic 2 answer, seen by running the anchor's
// request models (bench/anchor_server.py) under uvicorn: a null or other non-string list
// item names each bad item, every bad field has its entry, and a body whose Content-Type is not JSON reaches pydantic as
// a string (no Content-Type, application/json with any case or parameters and
// application/*+json are read as JSON).
func TestFastAPIBodiesForItemsAndContentTypes(t *testing.T) {
	s, _, _ := testServer(t, Config{}, true)
	const notObject = `{"detail":[{"type":"model_attributes_type","loc":["body"],"msg":"Input should be a valid dictionary or object to extract fields from","input":`
	for _, tc := range []struct {
		path, contentType, body, want string
	}{
		{"/retrieve", "application/json", `{"queries":["a",null]}`,
			`{"detail":[{"type":"string_type","loc":["body","queries",1],"msg":"Input should be a valid string","input":null}]}`},
		{"/retrieve", "application/json", `{"queries":[null, 5]}`,
			`{"detail":[{"type":"string_type","loc":["body","queries",0],"msg":"Input should be a valid string","input":null},` +
				`{"type":"string_type","loc":["body","queries",1],"msg":"Input should be a valid string","input":5}]}`},
		{"/retrieve", "application/json", `{"queries":[null,"a",3],"topk":"x","return_scores":"maybe"}`,
			`{"detail":[{"type":"string_type","loc":["body","queries",0],"msg":"Input should be a valid string","input":null},` +
				`{"type":"string_type","loc":["body","queries",2],"msg":"Input should be a valid string","input":3},` +
				`{"type":"int_parsing","loc":["body","topk"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"x"},` +
				`{"type":"bool_parsing","loc":["body","return_scores"],"msg":"Input should be a valid boolean, unable to interpret input","input":"maybe"}]}`},
		{"/retrieve", "application/json", `{"return_scores":[]}`,
			`{"detail":[{"type":"missing","loc":["body","queries"],"msg":"Field required","input":{"return_scores":[]}},` +
				`{"type":"bool_type","loc":["body","return_scores"],"msg":"Input should be a valid boolean","input":[]}]}`},
		{"/retrieve", "application/json", `{"queries":[{}]}`,
			`{"detail":[{"type":"string_type","loc":["body","queries",0],"msg":"Input should be a valid string","input":{}}]}`},
		{"/access", "application/json", `{"urls":["a","b",null]}`,
			`{"detail":[{"type":"string_type","loc":["body","urls",2],"msg":"Input should be a valid string","input":null}]}`},
		{"/retrieve", "text/plain", `{"queries":["a"]}`, notObject + `"{\"queries\":[\"a\"]}"}]}`},
		{"/retrieve", "application/x-www-form-urlencoded", `queries=a&topk=3`, notObject + `"queries=a&topk=3"}]}`},
		{"/retrieve", "multipart/form-data", `{"queries":["a"]}`, notObject + `"{\"queries\":[\"a\"]}"}]}`},
		{"/retrieve", "application/octet-stream", `["a"]`, notObject + `"[\"a\"]"}]}`},
		{"/retrieve", "application/x-json", `null`, notObject + `"null"}]}`},
		{"/retrieve", "text/json", `   `, notObject + `"   "}]}`},
		{"/retrieve", "application/", `{}`, notObject + `"{}"}]}`},
		{"/retrieve", "json", `{}`, notObject + `"{}"}]}`},
		{"/access", "text/plain", `{"urls":["a"]}`, notObject + `"{\"urls\":[\"a\"]}"}]}`},
		{"/retrieve", "text/plain", ``, `{"detail":[{"type":"missing","loc":["body"],"msg":"Field required","input":null}]}`},
	} {
		code, out, _ := do(s, "POST", tc.path, tc.body, "Content-Type", tc.contentType)
		if code != 422 || string(out) != tc.want {
			t.Errorf("%s %q %s:\n got  %d %s\n want 422 %s", tc.path, tc.contentType, tc.body, code, out, tc.want)
		}
	}
	for _, ct := range []string{"", " application/json ", "APPLICATION/JSON", "application/JSON; charset=utf-8", "application/json;",
		"application/vnd.api+json", "application/json-patch+json", "application/json; charset=latin-1"} {
		if code, out, _ := do(s, "POST", "/retrieve", `{"queries":["a"]}`, "Content-Type", ct); code != 200 {
			t.Errorf("Content-Type %q: got %d %s, want 200", ct, code, out)
		}
	}
}

func TestAccess(t *testing.T) {
	s, _, _ := testServer(t, Config{}, true)
	code, out, _ := do(s, "POST", "/access", `{"urls":["https://en.wikipedia.org/w/index.php/Beveridge,%20Victoria","https://nowhere"]}`)
	want := `{"result":[{"url":"https://en.wikipedia.org/w/index.php?title=Beveridge,%20Victoria","contents":"Beveridge is a town"},null]}`
	if code != 200 || string(out) != want {
		t.Errorf("got %d %s\nwant %s", code, out, want)
	}
	if code, out, _ := do(s, "POST", "/access", `{"url":[]}`); code != 422 || !strings.Contains(string(out), `"loc":["body","urls"]`) {
		t.Errorf("missing urls: %d %s", code, out)
	}
	noPages, _, _ := testServer(t, Config{}, false)
	code, out, _ = do(noPages, "POST", "/access", `{"urls":["x"]}`)
	var detail struct{ Detail string }
	if code != 404 || json.Unmarshal(out, &detail) != nil || !strings.Contains(detail.Detail, "--pages") {
		t.Errorf("no pages file: got %d %s, want 404 naming --pages", code, out)
	}
}

func TestNotReadyHealthAndRouting(t *testing.T) {
	s := newServer(t, Config{})
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/health", 200}, {"GET", "/ready", 503}, {"POST", "/retrieve", 503}, {"POST", "/access", 503},
		{"GET", "/retrieve", 405}, {"POST", "/health", 405}, {"GET", "/nope", 404}, {"GET", "/metrics", 200},
	} {
		code, out, resp := do(s, tc.method, tc.path, `{"queries":["a"]}`)
		if code != tc.code {
			t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, code, out, tc.code)
		}
		if tc.path != "/metrics" && !json.Valid(out) {
			t.Errorf("%s %s: body %q is not JSON", tc.method, tc.path, out)
		}
		if code == 503 && tc.path != "/ready" && len(resp.Header.Peek("Retry-After")) == 0 {
			t.Errorf("%s %s: 503 without Retry-After", tc.method, tc.path)
		}
	}
}

func TestAuthToken(t *testing.T) {
	s, _, _ := testServer(t, Config{AuthToken: "s3cret"}, false)
	body := `{"queries":["a"]}`
	if code, _, resp := do(s, "POST", "/retrieve", body); code != 401 || string(resp.Header.Peek("WWW-Authenticate")) != "Bearer" {
		t.Errorf("no token: %d, want 401 with WWW-Authenticate", code)
	}
	if code, _, _ := do(s, "POST", "/retrieve", body, "Authorization", "Bearer wrong"); code != 401 {
		t.Errorf("wrong token: %d, want 401", code)
	}
	if code, _, _ := do(s, "POST", "/retrieve", body, "Authorization", "Bearer s3cret"); code != 200 {
		t.Errorf("right token: %d, want 200", code)
	}
	if code, _, _ := do(s, "GET", "/health", ""); code != 200 {
		t.Errorf("/health must not need the token: %d", code)
	}
}

func TestMetricsExposition(t *testing.T) {
	s, _, _ := testServer(t, Config{}, false)
	do(s, "POST", "/retrieve", `{"queries":["a","b","c"]}`)
	do(s, "POST", "/retrieve", `{"topk":1}`)
	_, out, _ := do(s, "GET", "/metrics", "")
	text := string(out)
	for _, want := range []string{
		`needle_requests_total{endpoint="retrieve",code="200"} 1`,
		`needle_requests_total{endpoint="retrieve",code="422"} 1`,
		`needle_request_duration_seconds_count{endpoint="retrieve"} 2`,
		`needle_batch_queries_bucket{le="4"} 1`,
		`needle_batch_queries_sum 3`,
		`needle_queries_total 3`,
		`needle_ready 1`,
		`needle_queue_queries 0`,
		`needle_index_vectors 50`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
}

func TestAppendScoreMatchesPythonJSON(t *testing.T) {
	// Right column: json.dumps(np.array([v], dtype=np.float32).tolist()[0]) in Python.
	for _, tc := range []struct {
		v    float32
		want string
	}{
		{0.8312345, "0.8312345147132874"}, {1, "1.0"}, {0, "0.0"}, {-0.25, "-0.25"},
		{1e-5, "9.999999747378752e-06"}, {3.4e38, "3.3999999521443642e+38"}, {123456.7, "123456.703125"},
		{0.1, "0.10000000149011612"}, {-1.5e-7, "-1.500000053056283e-07"}, {2e16, "2.000000054512845e+16"},
	} {
		if got := string(appendScore(nil, tc.v)); got != tc.want {
			t.Errorf("appendScore(%v) = %s, want %s", tc.v, got, tc.want)
		}
	}
}

func TestBadCorpusRowsAreLeftOut(t *testing.T) {
	enc, docs, idx := testParts()
	s := newServer(t, Config{})
	serveParts(t, s, enc, idx, enginetest.EvenRowsBad{DocStore: docs}, nil)
	code, out, _ := do(s, "POST", "/retrieve", `{"queries":["topic1","topic2"],"topk":10,"return_scores":true}`)
	var got struct{ Result [][]scoredHit }
	if code != 200 || json.Unmarshal(out, &got) != nil || len(got.Result) != 2 {
		t.Fatalf("got %d %s", code, out)
	}
	total := 0
	for _, hits := range got.Result {
		for _, h := range hits {
			if id := h.Document["id"].(string); id[len(id)-1]%2 == 0 {
				t.Errorf("bad row %s was returned", id)
			}
		}
		total += len(hits)
	}
	if total == 0 || total == 20 {
		t.Fatalf("%d hits: want the odd rows of 20 only", total)
	}
	_, metrics, _ := do(s, "GET", "/metrics", "")
	if want := fmt.Sprintf("needle_bad_rows_skipped_total %d", 20-total); !strings.Contains(string(metrics), want) {
		t.Errorf("metrics lack %q", want)
	}
}

// A corpus truncated in place while served: that request gets a 500, /ready turns false
// with one log line, and the process lives on (a read past the new end is a SIGBUS).
func TestCorpusTruncatedUnderServer(t *testing.T) {
	enc := &enginetest.HashEncoder{Dimension: 16}
	texts := make([]string, 3000) // rows spanning many pages past the truncation point
	var corpus strings.Builder
	for i := range texts {
		texts[i] = fmt.Sprintf("title%d about topic%d", i, i%7)
		fmt.Fprintf(&corpus, `{"id":"%d","contents":%q}`+"\n", i, texts[i])
	}
	path := writeTempFile(t, "corpus.jsonl", corpus.String())
	docs, err := docstore.OpenCorpus(path, docstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { docs.Close() })
	_, idx := enginetest.Corpus(enc, texts)
	s := newServer(t, Config{})
	r, err := engine.NewRetriever(enc, idx, docs, nil, "", enginetest.Batcher(engine.BatcherOptions{MaxBatch: 8}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	s.SetRetriever(r)
	logged := captureLog(t)

	body := `{"queries":["title2999 about topic3"],"topk":3000}` // every row: some past the cut
	if code, out, _ := do(s, "POST", "/retrieve", body); code != 200 || !strings.Contains(string(out), `"id":"2999"`) {
		t.Fatalf("before: %d %s", code, out)
	}
	if err := os.Truncate(path, 64); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		code, out, _ := do(s, "POST", "/retrieve", body)
		if code != 500 || !strings.Contains(string(out), "changed under the server") {
			t.Errorf("after truncation: %d %s, want 500 saying the corpus changed", code, out)
		}
	}
	if code, out, _ := do(s, "GET", "/ready", ""); code != 503 || string(out) != `{"status":"a served file changed"}` {
		t.Errorf("/ready: %d %s", code, out)
	}
	if code, _, _ := do(s, "GET", "/health", ""); code != 200 {
		t.Errorf("/health: %d", code)
	}
	if _, out, _ := do(s, "GET", "/metrics", ""); !strings.Contains(string(out), "needle_ready 0\n") {
		t.Errorf("/metrics does not say needle_ready 0")
	}
	if lines := strings.Count(logged.String(), "\n"); lines != 1 || !strings.Contains(logged.String(), path) {
		t.Errorf("log: %d lines %q, want one naming %s", lines, logged.String(), path)
	}
}

func writeTempFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// captureLog sends the standard logger's lines to the returned buffer until the test ends.
func captureLog(t *testing.T) *bytes.Buffer {
	var logged bytes.Buffer
	log.SetOutput(&logged)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	return &logged
}

// A pages file truncated in place while served: /access answers 500 and /ready turns false.
func TestPagesTruncatedUnderServer(t *testing.T) {
	var pages strings.Builder
	for i := range 3000 { // rows spanning many pages past the truncation point
		fmt.Fprintf(&pages, `{"url":"https://en.wikipedia.org/wiki/P%d","contents":"page %d"}`+"\n", i, i)
	}
	path := writeTempFile(t, "pages.jsonl", pages.String())
	ps, err := docstore.OpenPages(path, docstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	enc := &enginetest.HashEncoder{Dimension: 16}
	docs, idx := enginetest.Corpus(enc, []string{"a", "b"})
	r, err := engine.NewRetriever(enc, idx, docs, ps, "", enginetest.Batcher(engine.BatcherOptions{MaxBatch: 8}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	s := newServer(t, Config{})
	s.SetRetriever(r)
	logged := captureLog(t)

	body := `{"urls":["https://en.wikipedia.org/wiki/P2999"]}`
	if code, out, _ := do(s, "POST", "/access", body); code != 200 || !strings.Contains(string(out), `"page 2999"`) {
		t.Fatalf("before: %d %s", code, out)
	}
	if err := os.Truncate(path, 64); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := do(s, "POST", "/access", body); code != 500 || !strings.Contains(string(out), "changed under the server") {
		t.Errorf("after truncation: %d %s, want 500 saying the file changed", code, out)
	}
	if code, _, _ := do(s, "GET", "/ready", ""); code != 503 {
		t.Errorf("/ready: %d, want 503", code)
	}
	if !strings.Contains(logged.String(), "the pages file changed under the server") {
		t.Errorf("log %q does not name the pages file", logged.String())
	}
}

func TestCopyingARowOfATruncatedCorpusIsAnError(t *testing.T) {
	path := writeTempFile(t, "corpus.jsonl", strings.Repeat("x", 3*4096))
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mapped, err := unix.Mmap(int(f.Fd()), 0, 3*4096, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mapped)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	// A row the engine read before the cut: only copying it into the response faults.
	hits := [][]engine.Hit{{{Row: mapped[8192:8300], Score: 1}}}
	if err := engine.CatchFault(func() { appendRetrieveResult(nil, hits, true) }); !errors.Is(err, engine.ErrChanged) {
		t.Errorf("got %v, want an error wrapping engine.ErrChanged", err)
	}
}

// A GPU lost while serving (the index's device fails): that request and later ones get 503
// with the device's message, /ready turns false, /health stays ok, the process stays up.
func TestLostIndexDevice(t *testing.T) {
	enc, docs, idx := testParts()
	dev := &enginetest.FailingDevice{FlatIndex: idx}
	s := newServer(t, Config{})
	serveParts(t, s, enc, dev, docs, nil)
	if code, out, _ := do(s, "POST", "/retrieve", `{"queries":["topic1"],"topk":2}`); code != 200 {
		t.Fatalf("before the failure: %d %s", code, out)
	}
	dev.Fail(errors.New("cuda launch nl_topk_tile: an illegal memory access was encountered (CUDA error 700)"))
	for range 2 {
		code, out, _ := do(s, "POST", "/retrieve", `{"queries":["topic1"],"topk":2}`)
		if code != 503 || !strings.Contains(string(out), "the index's device failed: cuda launch nl_topk_tile: an illegal memory access") {
			t.Fatalf("after the failure: %d %s", code, out)
		}
	}
	if code, out, _ := do(s, "GET", "/ready", ""); code != 503 || !strings.Contains(string(out), "device failed") {
		t.Errorf("/ready: %d %s", code, out)
	}
	if code, _, _ := do(s, "GET", "/health", ""); code != 200 {
		t.Errorf("/health: %d", code)
	}
	if _, out, _ := do(s, "GET", "/metrics", ""); !strings.Contains(string(out), "needle_ready 0") {
		t.Errorf("/metrics does not say not ready")
	}
}

// A repeated /retrieve is answered from the engine's result cache, byte for byte the same,
// and /metrics counts the hits, misses and bytes.
func TestMetricsCache(t *testing.T) {
	enc, docs, idx := testParts()
	s := newServer(t, Config{})
	r, err := engine.NewRetriever(enc, idx, docs, nil, "query: ", enginetest.Batcher(engine.BatcherOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	s.SetRetriever(r.WithCache(1 << 20))
	body := `{"queries":["topic1","word3"],"topk":2,"return_scores":true}`
	_, first, _ := do(s, "POST", "/retrieve", body)
	_, again, _ := do(s, "POST", "/retrieve", body)
	if string(first) != string(again) || !strings.HasPrefix(string(first), `{"result":[[{"document":`) {
		t.Errorf("cached answer %s differs from the first %s", again, first)
	}
	_, out, _ := do(s, "GET", "/metrics", "")
	for _, want := range []string{"needle_cache_hits_total 2\n", "needle_cache_misses_total 2\n", "needle_cache_coalesced_total 0\n", "needle_cache_lifted_total 0\n", "needle_cache_evictions_total 0\n",
		fmt.Sprintf("needle_cache_bytes %d\n", r.CacheStats().Bytes), "needle_cache_max_bytes 1048576\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("metrics lack %q:\n%s", want, out)
		}
	}
}

// An index in another process (Milvus) that goes down: /retrieve answers 503 with the
// reason and Retry-After, /ready and needle_ready turn false; all recover when it is back.
func TestRemoteIndexDownAndBack(t *testing.T) {
	enc, docs, idx := testParts()
	remote := &enginetest.RemoteIndex{Index: idx}
	s := newServer(t, Config{})
	serveParts(t, s, enc, remote, docs, nil)
	body := `{"queries":["title7"],"topk":2}`
	remote.Down.Store(true)
	code, out, resp := do(s, "POST", "/retrieve", body)
	if code != 503 || !strings.Contains(string(out), "remote index is down") || len(resp.Header.Peek("Retry-After")) == 0 {
		t.Errorf("/retrieve while down: %d %s (Retry-After %q)", code, out, resp.Header.Peek("Retry-After"))
	}
	if code, out, _ := do(s, "GET", "/ready", ""); code != 503 || !strings.Contains(string(out), `"status":"index unavailable: the test's remote index is down"`) {
		t.Errorf("/ready while down: %d %s", code, out)
	}
	if _, out, _ := do(s, "GET", "/metrics", ""); !strings.Contains(string(out), "needle_ready 0\n") {
		t.Errorf("/metrics while down does not say needle_ready 0")
	}
	remote.Down.Store(false)
	if code, out, _ := do(s, "POST", "/retrieve", body); code != 200 || !strings.Contains(string(out), `"id": "`) {
		t.Errorf("/retrieve once back: %d %s", code, out)
	}
	if code, _, _ := do(s, "GET", "/ready", ""); code != 200 {
		t.Errorf("/ready once back: %d", code)
	}
	if _, out, _ := do(s, "GET", "/metrics", ""); !strings.Contains(string(out), "needle_ready 1\n") {
		t.Errorf("/metrics once back does not say needle_ready 1")
	}
}
