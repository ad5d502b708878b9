package bench

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The fairness run sends, per round, singles to the idle server, then the POST alone and the
// POST with singles; the singles never repeat a text of the POST. The report has its lines
// (the figures themselves are timings, not checked).
func TestFairnessReport(t *testing.T) {
	var (
		mu      sync.Mutex
		posts   int
		singles = map[string]int{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Queries []string }
		if json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest) // the URL check sends no body
			return
		}
		mu.Lock()
		if len(req.Queries) == 1 {
			singles[req.Queries[0]]++
		} else if len(req.Queries) == 5 {
			posts++
		} else {
			t.Errorf("a request of %d queries", len(req.Queries))
		}
		mu.Unlock()
		if len(req.Queries) == 5 {
			time.Sleep(50 * time.Millisecond) // room for singles during the POST
		}
		w.Write([]byte(`{"result": []}`))
	}))
	defer srv.Close()
	opt := RetrieveOptions{URL: srv.URL, QueriesFile: writeQueries(t, "a\nb\nc\nd\ne\nf\ng\n"), Concurrency: 1, Batch: 1,
		Duration: time.Second, TopK: 3, Timeout: 10 * time.Second, ServerPID: os.Getpid(),
		Fairness: FairnessOptions{Run: true, Post: 5, Rate: 200, Rounds: 2, Idle: 20 * time.Millisecond}}
	var out bytes.Buffer
	if err := Retrieve(&out, opt); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "fairness: url "+srv.URL+"  POST of 5 queries  single queries 200/s  2 rounds") ||
		!strings.HasPrefix(lines[1], "idle single queries: ") || !strings.HasPrefix(lines[2], "single queries during the POST: ") ||
		!strings.HasPrefix(lines[3], "POST alone ") || !strings.Contains(lines[3], " with the singles ") ||
		!strings.HasPrefix(lines[4], "POST with the singles / alone, per round: ") || len(strings.Fields(lines[4])) != 10 ||
		!strings.HasPrefix(lines[5], "server CPU: POST alone ") || !strings.Contains(lines[5], "share of it (its CPU alone / all), per round: ") {
		t.Fatalf("report:\n%s", out.String())
	}
	if posts != 4 || len(singles) == 0 {
		t.Errorf("%d POSTs and singles %v; want 4 POSTs (2 per round) and singles", posts, singles)
	}
	for q := range singles {
		if q < "f" {
			t.Errorf("single query %q repeats a text of the POST (a-e)", q)
		}
	}
}

func TestFairnessBadOptions(t *testing.T) {
	opt := RetrieveOptions{QueriesFile: writeQueries(t, "q\n"), Concurrency: 1, Batch: 1, TopK: 1, Duration: time.Second, Timeout: time.Second,
		Fairness: FairnessOptions{Run: true, Post: 0, Rate: 1, Rounds: 1, Idle: time.Second}}
	if err := Retrieve(&bytes.Buffer{}, opt); err == nil || !strings.Contains(err.Error(), "Fairness.Post: 0, want > 0") {
		t.Errorf("--post 0: %v", err)
	}
	opt.Trace, opt.QueriesFile, opt.Fairness.Post = opt.QueriesFile, "", 1
	if err := Retrieve(&bytes.Buffer{}, opt); err == nil || !strings.Contains(err.Error(), "Trace: a Fairness run takes QueriesFile") {
		t.Errorf("--trace: %v", err)
	}
}

// The cache's case from closed-loop workers: every POST asks new texts, the singles during a
// POST ask its texts, and the idle singles texts no POST asks.
func TestFairnessSinglesInPost(t *testing.T) {
	var (
		mu      sync.Mutex
		posts   []string // the texts of each POST, joined
		singles = map[string]int{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Queries []string }
		if json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		if len(req.Queries) == 1 {
			singles[req.Queries[0]]++
		} else {
			posts = append(posts, strings.Join(req.Queries, ""))
		}
		mu.Unlock()
		if len(req.Queries) > 1 {
			time.Sleep(50 * time.Millisecond)
		}
		w.Write([]byte(`{"result": []}`))
	}))
	defer srv.Close()
	opt := RetrieveOptions{URL: srv.URL, QueriesFile: writeQueries(t, "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\n"), Concurrency: 1,
		Batch: 1, Duration: time.Second, TopK: 3, Timeout: 10 * time.Second,
		Fairness: FairnessOptions{Run: true, Post: 3, Rate: 1, Workers: 2, Rounds: 2, Idle: 20 * time.Millisecond, InPost: true}}
	var out bytes.Buffer
	if err := Retrieve(&out, opt); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "single queries from 2 workers asking the POST's texts  2 rounds") {
		t.Errorf("report:\n%s", out.String())
	}
	if want := []string{"abc", "def", "ghi", "jkl"}; !slices.Equal(posts, want) {
		t.Errorf("POSTs %q, want %q (new texts each)", posts, want)
	}
	inPost := 0
	for q := range singles {
		if q != "m" {
			inPost++
		}
	}
	if singles["m"] == 0 || inPost == 0 {
		t.Errorf("singles %v: want idle ones (m) and ones during the POSTs (a-l)", singles)
	}
	opt.Fairness.Post = 7
	if err := Retrieve(&bytes.Buffer{}, opt); err == nil || !strings.Contains(err.Error(), "--singles-in-post needs more than 28 queries") {
		t.Errorf("too few queries: %v", err)
	}
}
