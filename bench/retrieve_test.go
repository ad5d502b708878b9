package bench

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeQueries writes content to a queries file in a temp folder and returns its path.
func writeQueries(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "queries.jsonl")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRetrieveReport(t *testing.T) {
	var (
		mu   sync.Mutex
		seen = map[string]int{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Queries      []string `json:"queries"`
			TopK         int      `json:"topk"`
			ReturnScores bool     `json:"return_scores"`
		}
		if r.URL.Path != "/retrieve" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest) // the URL check sends no body
			return
		}
		if len(req.Queries) != 2 || req.TopK != 4 || req.ReturnScores {
			t.Errorf("request %+v, want 2 queries, topk 4, no scores", req)
		}
		mu.Lock()
		for _, q := range req.Queries {
			seen[q]++
		}
		mu.Unlock()
		w.Write([]byte(`{"result": [[], []]}`))
	}))
	defer srv.Close()
	opt := RetrieveOptions{URL: srv.URL + "/", QueriesFile: writeQueries(t, "{\"query\": \"a\"}\n\n{\"question\": \"b\"}\nc\n"),
		Concurrency: 2, Duration: time.Minute, Requests: 5, Batch: 2, TopK: 4, Timeout: 10 * time.Second, ServerPID: os.Getpid(),
		Plot: filepath.Join(t.TempDir(), "run.svg")}
	var out bytes.Buffer
	if err := Retrieve(&out, opt); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 || lines[0] != "url "+srv.URL+"/  concurrency 2  batch 2  topk 4  return_scores false" ||
		!strings.HasPrefix(lines[1], "ok requests 5  queries 10  errors 0  in ") || !strings.HasPrefix(lines[2], "queries/s ") ||
		!strings.HasPrefix(lines[3], "latency ms  p50 ") || !strings.HasPrefix(lines[4], "server CPU ") {
		t.Fatalf("report:\n%s", out.String())
	}
	if svg, err := os.ReadFile(opt.Plot); err != nil || !strings.Contains(string(svg), "request latency, 5 measured") {
		t.Errorf("--plot: %v, %.100q", err, svg)
	}
	// 10 queries cycle through the file's 3: a b c a b c a b c a.
	if seen["a"] != 4 || seen["b"] != 3 || seen["c"] != 3 || len(seen) != 3 {
		t.Errorf("queries sent: %v", seen)
	}
}

func TestRetrieveCountsErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   string
	}{
		{http.StatusInternalServerError, "boom", `error "HTTP 500" x3`},
		{http.StatusOK, `{"error": "x"}`, `error "200 without a result" x3`},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			w.Write([]byte(tc.body))
		}))
		opt := RetrieveOptions{URL: srv.URL, QueriesFile: writeQueries(t, "q\n"), Concurrency: 1, Duration: time.Minute,
			Requests: 3, Batch: 1, TopK: 3, ReturnScores: true, Timeout: 10 * time.Second}
		var out bytes.Buffer
		err := Retrieve(&out, opt)
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "ok requests 0  queries 0  errors 3  in ") || !strings.Contains(out.String(), tc.want) {
			t.Errorf("status %d: report:\n%s", tc.status, out.String())
		}
	}
}

func TestRetrieveBadInput(t *testing.T) {
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	queries := writeQueries(t, "q\n")
	for _, tc := range []struct {
		name string
		opt  RetrieveOptions
		want string
	}{
		{"no queries file", RetrieveOptions{Concurrency: 1, Batch: 1, Duration: time.Second}, "one of two: QueriesFile"},
		{"zero batch", RetrieveOptions{QueriesFile: queries, Concurrency: 1, Duration: time.Second}, "Batch: 0, want > 0"},
		{"empty file", RetrieveOptions{QueriesFile: writeQueries(t, "\n \n"), Concurrency: 1, Batch: 1, TopK: 1, Duration: time.Second, Timeout: time.Second}, "no queries"},
		{"bad JSON line", RetrieveOptions{QueriesFile: writeQueries(t, "a\n{\"query\": 1}\n"), Concurrency: 1, Batch: 1, TopK: 1, Duration: time.Second, Timeout: time.Second}, "line 2"},
		{"no /retrieve", RetrieveOptions{URL: notFound.URL, QueriesFile: queries, Concurrency: 1, Batch: 1, TopK: 1, Duration: time.Second, Timeout: time.Second}, "status 404"},
	} {
		if err := Retrieve(&bytes.Buffer{}, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}
