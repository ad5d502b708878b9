package server

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"needle/testkit/enginetest"
)

// A client that closes its connection while its 80 queries (10 jobs of 8) wait behind the
// batch being encoded: the batch in progress finishes encoding and is not searched, the other 9
// jobs are dropped without encoding, and a second client is answered as usual.
func TestDisconnectedClientsQueriesAreDropped(t *testing.T) {
	hash, docs, idx := testParts()
	enc := &enginetest.GatedEncoder{Encoder: hash, Started: make(chan struct{}, 16), Release: make(chan struct{}, 16)}
	s := newServer(t, Config{})
	serveParts(t, s, enc, idx, docs, nil)
	addr := startTCP(t, s)
	t.Cleanup(func() { close(enc.Release) }) // first of the cleanups: a failed test leaves no encoder waiting

	queries := make([]string, 80)
	for i := range queries {
		queries[i] = fmt.Sprintf("%q", fmt.Sprintf("topic%d", i))
	}
	body := `{"queries":[` + strings.Join(queries, ",") + `],"topk":2}`
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(c, rawRetrieve(body))
	<-enc.Started // the first job is being encoded
	before := hash.Batches.Load()
	c.Close()
	metric := func(name string) string {
		_, m, _ := do(s, "GET", "/metrics", "")
		for _, line := range strings.Split(string(m), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				return v
			}
		}
		return ""
	}
	waitFor(t, "the disconnect is seen", func() bool { return metric("needle_client_disconnects_total") == "1" })
	enc.Release <- struct{}{} // the batch in progress finishes
	waitFor(t, "the queue is empty", func() bool { return metric("needle_queue_queries") == "0" })
	if got := metric("needle_dropped_queries_total"); got != "80" {
		t.Errorf("needle_dropped_queries_total %s, want 80 (9 jobs of 8 never encoded, 1 not searched)", got)
	}
	if n := hash.Batches.Load() - before; n != 1 {
		t.Errorf("%d batches encoded after the disconnect began, want only the one in progress", n)
	}
	_, m, _ := do(s, "GET", "/metrics", "")
	if !strings.Contains(string(m), `needle_requests_total{endpoint="retrieve",code="499"} 1`) {
		t.Errorf("the disconnected request is not counted as 499:\n%s", m)
	}

	// A connected client is not affected: its request is answered after the gate opens.
	go func() {
		<-enc.Started
		enc.Release <- struct{}{}
	}()
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	small := `{"queries":["topic1"],"topk":2}`
	if code, out, _ := rawRequest(t, c2, rawRetrieve(small)); code != 200 {
		t.Errorf("connected client: %d %s", code, out)
	}
	// The same keep-alive connection serves a second request after the watch ended.
	go func() {
		<-enc.Started
		enc.Release <- struct{}{}
	}()
	if code, out, _ := rawRequest(t, c2, rawRetrieve(small)); code != 200 {
		t.Errorf("second request on the connection: %d %s", code, out)
	}
	if got := metric("needle_client_disconnects_total"); got != "1" {
		t.Errorf("needle_client_disconnects_total %s after two answered requests, want 1", got)
	}
}

// rawRetrieve is the raw HTTP/1.1 POST /retrieve of body.
func rawRetrieve(body string) string {
	return fmt.Sprintf("POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// waitFor polls cond for up to 10 seconds and fails t if it never holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}
