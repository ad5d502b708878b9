package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"needle/testkit/enginetest"
)

// Requests that come while the index loads are held (Config.LoadWait) and answered once the
// server is ready: a client without retries gets its answer, not a 503.
func TestRequestsWhileLoadingAreHeld(t *testing.T) {
	s := newServer(t, Config{LoadWait: time.Minute})
	addr := startTCP(t, s)
	answers := make(chan string, 2)
	postAsync(addr, "/retrieve", `{"queries":["topic1","topic2"],"topk":2}`, answers)
	postAsync(addr, "/access", `{"urls":["https://x/w/index.php?title=A"]}`, answers)
	waitFor(t, "both requests are held", func() bool { return s.metrics.held.Load() == 2 })
	enc, docs, idx := testParts()
	serveParts(t, s, enc, idx, docs, enginetest.Pages{"https://x/w/index.php?title=A": `{"url":"https://x/w/index.php?title=A"}`})
	for range 2 {
		if got := <-answers; !strings.HasPrefix(got, `200 {"result":[[{"id":`) && got != `200 {"result":[{"url":"https://x/w/index.php?title=A"}]}` {
			t.Errorf("held request: %s, want 200 with its result", got)
		}
	}
	if n := s.metrics.held.Load(); n != 0 {
		t.Errorf("%d requests still counted as held", n)
	}
}

// A held request ends with 503 + Retry-After past LoadWait and when Shutdown begins, and with
// 499 (counted) when its client leaves.
func TestHeldRequestsEnd(t *testing.T) {
	s := newServer(t, Config{LoadWait: 20 * time.Millisecond})
	resp, err := http.Post("http://"+startTCP(t, s)+"/retrieve", "application/json", strings.NewReader(`{"queries":["a"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("past LoadWait: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	s = newServer(t, Config{LoadWait: time.Minute})
	addr := startTCP(t, s)
	answers := make(chan string, 1)
	postAsync(addr, "/retrieve", `{"queries":["a"]}`, answers)
	waitFor(t, "the request is held", func() bool { return s.metrics.held.Load() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown with a held request: %v", err)
	}
	if got := <-answers; !strings.HasPrefix(got, "503 ") {
		t.Errorf("held request at Shutdown: %s, want 503", got)
	}

	s = newServer(t, Config{LoadWait: time.Minute})
	c := dial(t, startTCP(t, s))
	if _, err := c.Write([]byte(rawRetrieve(`{"queries":["a"]}`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the request is held", func() bool { return s.metrics.held.Load() == 1 })
	c.Close()
	waitFor(t, "the held request ended", func() bool { return s.metrics.held.Load() == 0 })
	waitFor(t, "the request is counted", func() bool { return s.metrics.requests[epRetrieve][statusClientClosed].Load() == 1 })
	if n := s.metrics.disconnects.Load(); n != 1 {
		t.Errorf("%d disconnects counted, want 1", n)
	}
}
