package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// post sends one /retrieve body and returns the response bytes, failing on a non-200.
func post(t *testing.T, addr, body string) []byte {
	t.Helper()
	resp, err := http.Post("http://"+addr+"/retrieve", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d %s (%v)", body, resp.StatusCode, b, err)
	}
	return b
}

// The result cache of `needle serve` (on by default) answers byte for byte what a server
// with --cache-mb 0 answers, on the real MiniLM encoder and FAISS index: the same request
// bodies, one at a time (so each is encoded in a batch of its own queries on both servers),
// sent twice. The second round comes from the cache; /metrics counts the hits and misses.
func TestCacheAnswersAreTheUncachedBytes(t *testing.T) {
	fx := newFixture(t)
	plain, cached := fx.start(t, "--cache-mb", "0"), fx.start(t)
	q := fx.queries
	body := func(topk int, scores bool, queries ...string) string {
		req := map[string]any{"queries": queries, "return_scores": scores}
		if topk > 0 {
			req["topk"] = topk
		}
		return string(must(json.Marshal(req)))
	}
	bodies := []string{
		body(3, true, q[0]),
		body(5, true, q[0]),             // another k: a miss
		body(3, false, q[0]),            // the same hits without scores: a hit
		body(3, true, q[1], q[2], q[1]), // a repeat inside the request is searched once
		body(0, false, q[3]),            // no topk: the default 3
	}
	for round := range 2 {
		for _, b := range bodies {
			want, got := post(t, plain.addr, b), post(t, cached.addr, b)
			if !bytes.Equal(got, want) {
				t.Fatalf("round %d, %s:\ncached   %s\nuncached %s", round+1, b, got, want)
			}
			if !bytes.HasPrefix(got, []byte(`{"result":[[{`)) {
				t.Fatalf("round %d, %s: %s", round+1, b, got)
			}
		}
	}
	for addr, want := range map[string][]string{
		cached.addr: {"needle_cache_hits_total 8\n", "needle_cache_misses_total 5\n", "needle_cache_max_bytes 268435456\n"},
		plain.addr:  {"needle_cache_hits_total 0\n", "needle_cache_misses_total 0\n", "needle_cache_max_bytes 0\n"},
	} {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, w := range want {
			if !bytes.Contains(metrics, []byte(w)) {
				t.Errorf("%s/metrics lacks %q", addr, w)
			}
		}
	}
	plain.stop(t)
	cached.stop(t)
}
