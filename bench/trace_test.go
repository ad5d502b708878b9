package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeTrace writes a trace of prompts x 8 rollouts x 3 turns with 2 own queries per later
// turn, drawn from 100 distinct texts, and returns its path and lines.
func writeTrace(t *testing.T, prompts int) (string, []traceLine) {
	t.Helper()
	var texts strings.Builder
	for i := range 100 {
		fmt.Fprintf(&texts, "{\"query\": \"the %d example sentence\"}\n", i)
	}
	out := filepath.Join(t.TempDir(), "trace.jsonl")
	var report bytes.Buffer
	err := Trace(&report, TraceOptions{QueriesFile: writeQueries(t, texts.String()), Out: out, Prompts: prompts, Rollouts: 8, Turns: 3, Own: 2, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	n := prompts * 24
	if want := fmt.Sprintf("wrote %s: %d queries (%d prompts x 8 rollouts x 3 turns), %d distinct: %.1f%% repeat an earlier query\n",
		out, n, prompts, prompts*7, 100*(1-7.0/24)); report.String() != want {
		t.Errorf("report %q, want %q", report.String(), want)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var lines []traceLine
	for _, s := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var l traceLine
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	if len(lines) != n {
		t.Fatalf("%d trace lines, want %d", len(lines), n)
	}
	return out, lines
}

// The trace has the stated mix: turn 1 one text per prompt; later turns one shared text for
// 6 rollouts and 2 texts of their own; no text in two places; turns arrive in order.
func TestTraceMix(t *testing.T) {
	_, lines := writeTrace(t, 4)
	type group struct{ prompt, turn int }
	texts := map[group]map[string]int{} // text -> rollouts asking it
	owner := map[string]group{}
	for i, l := range lines {
		if i > 0 && l.Turn < lines[i-1].Turn {
			t.Fatalf("line %d: turn %d after turn %d", i+1, l.Turn, lines[i-1].Turn)
		}
		g := group{l.Prompt, l.Turn}
		if texts[g] == nil {
			texts[g] = map[string]int{}
		}
		texts[g][l.Query]++
		if o, ok := owner[l.Query]; ok && o != g {
			t.Fatalf("%q asked in prompt/turn %v and %v", l.Query, o, g)
		}
		owner[l.Query] = g
	}
	for g, m := range texts {
		counts := []int{}
		for _, n := range m {
			counts = append(counts, n)
		}
		slices.Sort(counts)
		want := []int{1, 1, 6}
		if g.turn == 1 {
			want = []int{8}
		}
		if !slices.Equal(counts, want) {
			t.Errorf("prompt %d turn %d: rollouts per text %v, want %v", g.prompt, g.turn, counts, want)
		}
	}
	if len(texts) != 4*3 {
		t.Errorf("%d prompt/turn groups, want 12", len(texts))
	}
}

func TestTraceBadInput(t *testing.T) {
	queries := writeQueries(t, "a\nb\nc\na\n")
	out := filepath.Join(t.TempDir(), "t.jsonl")
	for _, tc := range []struct {
		opt  TraceOptions
		want string
	}{
		{TraceOptions{Out: out, Prompts: 1, Rollouts: 8, Turns: 3}, "QueriesFile: required"},
		{TraceOptions{QueriesFile: queries, Out: out, Prompts: 1, Rollouts: 8, Turns: 3, Own: 9}, "Own: 9, want 0 to Rollouts (8)"},
		{TraceOptions{QueriesFile: queries, Out: out, Prompts: 0, Rollouts: 8, Turns: 3}, "Prompts: 0, want > 0"},
		{TraceOptions{QueriesFile: queries, Out: out, Prompts: 1, Rollouts: 8, Turns: 3, Own: 1}, "Prompts: 1: the trace needs 5 distinct queries"},
	} {
		if err := Trace(&bytes.Buffer{}, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.opt, err, tc.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused trace left %s (%v)", out, err)
	}
}

// Replaying a trace sends each of its queries once, ends with it, and reports the server's
// cache hit rate from /metrics and the trace's repeat rate.
func TestRetrieveReplaysTrace(t *testing.T) {
	path, lines := writeTrace(t, 2)
	var (
		mu   sync.Mutex
		sent []string
		hits int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/metrics" {
			fmt.Fprintf(w, "needle_cache_hits_total %d\nneedle_cache_misses_total %d\n", hits, len(sent)-hits)
			return
		}
		var req struct{ Queries []string }
		if json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		for _, q := range req.Queries {
			if slices.Contains(sent, q) {
				hits++
			}
			sent = append(sent, q)
		}
		w.Write([]byte(`{"result": []}`))
	}))
	defer srv.Close()
	var out bytes.Buffer
	err := Retrieve(&out, RetrieveOptions{URL: srv.URL, Trace: path, Concurrency: 3, Duration: time.Millisecond, Batch: 5, TopK: 3, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, len(lines))
	for i, l := range lines {
		want[i] = l.Query
	}
	slices.Sort(want)
	slices.Sort(sent)
	if !slices.Equal(sent, want) {
		t.Errorf("sent %d queries, want the trace's %d, each once", len(sent), len(want))
	}
	for _, line := range []string{"ok requests 10  queries 48  errors 0", "cache hit rate 70.8% (server /metrics: 34 hits, 14 misses of which 0 waited for an identical search in flight)",
		fmt.Sprintf("trace %s: 48 queries, 70.8%% repeat an earlier one", path)} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("report lacks %q:\n%s", line, out.String())
		}
	}
}
