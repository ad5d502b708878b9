package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
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
// POST with singles (rounds alternate which goes first); the singles never repeat a text of the
// POST. The server here answers a POST that must have singles beside it only once three singles
// reached it while it was held, so the run cannot pass without sending them then; it counts the
// singles it answered with and without a POST in flight, and the report must agree.
func TestFairnessReport(t *testing.T) {
	var (
		mu             sync.Mutex
		posts          int
		inFlight       bool
		idle, during   int
		singles        = map[string]int{}
		duringThisPost chan struct{} // a single's arrival while the held POST waits
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Queries []string }
		if json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest) // the URL check sends no body
			return
		}
		switch len(req.Queries) {
		case 1:
			mu.Lock()
			singles[req.Queries[0]]++
			if inFlight {
				during++
				if duringThisPost != nil {
					select {
					case duringThisPost <- struct{}{}:
					default:
					}
				}
			} else {
				idle++
			}
			mu.Unlock()
		case 5:
			mu.Lock()
			posts++
			withSingles := posts == 2 || posts == 3 // round 0: alone, with; round 1: with, alone
			inFlight, duringThisPost = true, nil
			arrived := make(chan struct{}, 1)
			if withSingles {
				duringThisPost = arrived
			}
			mu.Unlock()
			for range 3 * btoi(withSingles) {
				select {
				case <-arrived:
				case <-time.After(time.Minute):
					t.Errorf("POST %d: no single query arrived while it was held", posts)
				}
			}
			mu.Lock()
			inFlight, duringThisPost = false, nil
			mu.Unlock()
		default:
			t.Errorf("a request of %d queries", len(req.Queries))
		}
		w.Write([]byte(`{"result": []}`))
	}))
	defer srv.Close()
	opt := RetrieveOptions{URL: srv.URL, QueriesFile: writeQueries(t, "a\nb\nc\nd\ne\nf\ng\n"), Concurrency: 1, Batch: 1,
		Duration: time.Second, TopK: 3, Timeout: 10 * time.Minute, ServerPID: os.Getpid(),
		Fairness: FairnessOptions{Run: true, Post: 5, Rate: 200, Rounds: 2, Idle: 20 * time.Millisecond}}
	var out bytes.Buffer
	if err := Retrieve(&out, opt); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var reportIdle, reportDuring int
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "fairness: url "+srv.URL+"  POST of 5 queries  single queries 200/s  2 rounds") ||
		scan(lines[1], "idle single queries: %d ", &reportIdle) != nil ||
		scan(lines[2], "single queries during the POST: %d ", &reportDuring) != nil ||
		!strings.HasPrefix(lines[3], "POST alone ") || !strings.Contains(lines[3], " with the singles ") ||
		!strings.HasPrefix(lines[4], "POST with the singles / alone, per round: ") || len(strings.Fields(lines[4])) != 10 ||
		!strings.HasPrefix(lines[5], "server CPU: POST alone ") || !strings.Contains(lines[5], "share of it (its CPU alone / all), per round: ") {
		t.Fatalf("report:\n%s", out.String())
	}
	// A single the server saw beside a POST was sent during one; one sent during a POST may
	// reach the server just after it (counted idle there), never the other way.
	if reportIdle+reportDuring != idle+during || reportDuring < during || during < 6 || idle == 0 || posts != 4 {
		t.Errorf("report: %d idle singles, %d during the POSTs; the server: %d, %d, %d POSTs (want 4, >= 3 singles beside each held one)",
			reportIdle, reportDuring, idle, during, posts)
	}
	for q := range singles {
		if q < "f" {
			t.Errorf("single query %q repeats a text of the POST (a-e)", q)
		}
	}
}

// scan reads line's figures by format (a prefix of the line).
func scan(line, format string, v ...any) error {
	_, err := fmt.Sscanf(line, format, v...)
	return err
}

// btoi is 1 for true.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
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
