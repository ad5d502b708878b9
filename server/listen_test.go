package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"needle/testkit/enginetest"
)

// Over a real socket: limits fasthttp enforces before the handler still answer JSON.
func TestServeOverTCPLimits(t *testing.T) {
	s, _, _ := testServer(t, Config{MaxBodyBytes: 1024}, false)
	url := "http://" + startTCP(t, s)

	post := func(body string) (int, string) {
		resp, err := http.Post(url+"/retrieve", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	if code, out := post(`{"queries":["topic1"],"topk":2,"return_scores":true}`); code != 200 || !strings.HasPrefix(out, `{"result":[[{"document":{`) {
		t.Errorf("small request: %d %s", code, out)
	}
	big := `{"queries":["` + strings.Repeat("x", 2000) + `"]}`
	if code, out := post(big); code != 413 || !strings.Contains(out, `"detail"`) {
		t.Errorf("oversized body: %d %s, want 413 JSON", code, out)
	}
}

// startTCP serves s on a loopback port until the test ends.
func startTCP(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	return ln.Addr().String()
}

// postAsync POSTs body to addr's path and sends "status body" (or the error) to answers.
func postAsync(addr, path, body string, answers chan<- string) {
	go func() {
		resp, err := http.Post("http://"+addr+path, "application/json", strings.NewReader(body))
		if err != nil {
			answers <- err.Error()
			return
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		answers <- fmt.Sprintf("%d %s", resp.StatusCode, out)
	}()
}

// rawRequest writes raw on c (nothing if empty) and reads one response.
func rawRequest(t *testing.T, c net.Conn, raw string) (int, string, http.Header) {
	t.Helper()
	if raw != "" {
		if _, err := c.Write([]byte(raw)); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("after %q: %v", raw, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out), resp.Header
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// metricsText fetches /metrics on a connection under the limit.
func metricsText(t *testing.T, c net.Conn) string {
	t.Helper()
	code, out, _ := rawRequest(t, c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
	if code != 200 {
		t.Fatalf("/metrics: %d %s", code, out)
	}
	return out
}

// Over real sockets: what fasthttp refuses before the handler answers JSON and is counted.
func TestRefusalsBelowHandlersAreJSONAndCounted(t *testing.T) {
	s, _, _ := testServer(t, Config{MaxBodyBytes: 1024, ReadTimeout: 300 * time.Millisecond}, false)
	addr := startTCP(t, s)
	for _, tc := range []struct {
		name, raw string
		code      int
	}{
		{"body too large", "POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2000\r\n\r\n" + strings.Repeat("x", 2000), 413},
		{"header too large", "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("y", 8000) + "\r\n\r\n", 431},
		{"malformed request line", "GARBAGE\r\n\r\n", 400},
		{"malformed header", "GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400},
		{"read timeout", "POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{", 408},
	} {
		code, out, h := rawRequest(t, dial(t, addr), tc.raw)
		var d struct{ Detail string }
		if code != tc.code || json.Unmarshal([]byte(out), &d) != nil || d.Detail == "" || h.Get("Content-Type") != "application/json" {
			t.Errorf("%s: got %d %q (%s), want %d with a JSON detail", tc.name, code, out, h.Get("Content-Type"), tc.code)
		}
	}
	m := metricsText(t, dial(t, addr))
	for _, want := range []string{
		`needle_refused_total{reason="body_too_large"} 1`, `needle_refused_total{reason="header_too_large"} 1`,
		`needle_refused_total{reason="malformed_request"} 2`, `needle_refused_total{reason="read_timeout"} 1`,
		`needle_refused_total{reason="connection_limit"} 0`,
	} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// At the connection limit /health still answers, other requests get a JSON 503, and
// past the reserve a connection gets the JSON 503 before sending anything.
func TestHealthAnswersAtConnectionLimit(t *testing.T) {
	s, _, _ := testServer(t, Config{MaxConns: 2}, false)
	addr := startTCP(t, s)
	held := []net.Conn{dial(t, addr), dial(t, addr)}
	for _, c := range held { // a served request proves the connection was accepted
		if code, out, _ := rawRequest(t, c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); code != 200 {
			t.Fatalf("under the limit: %d %s", code, out)
		}
	}
	// closedAfter reads one response on a fresh connection and waits for the server to
	// close it, so that it no longer counts.
	closedAfter := func(raw string) (int, string, http.Header) {
		c := dial(t, addr)
		code, out, h := rawRequest(t, c, raw)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Errorf("after %q: connection still open (%d, %v)", raw, n, err)
		}
		return code, out, h
	}
	if code, out, _ := closedAfter("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); code != 200 || out != `{"status":"ok"}` {
		t.Errorf("/health at the limit: %d %s", code, out)
	}
	code, out, h := closedAfter("POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n\r\n" + `{"queries":["a"]}`)
	if want := `{"detail":"the server's connection limit is reached"}`; code != 503 || out != want || h.Get("Retry-After") == "" {
		t.Errorf("/retrieve at the limit: %d %s, want 503 %s with Retry-After", code, out, want)
	}
	for range connReserve {
		dial(t, addr)
	}
	code, out, _ = rawRequest(t, dial(t, addr), "")
	if want := `{"detail":"the server's connection limit is reached"}`; code != 503 || out != want {
		t.Errorf("past the reserve: %d %s, want 503 %s", code, out, want)
	}
	if m := metricsText(t, held[0]); !strings.Contains(m, `needle_refused_total{reason="connection_limit"} 2`+"\n") {
		t.Errorf("/metrics does not count the 2 refused connections:\n%s", m)
	}
}

// A request still queued in the engine when Shutdown starts is answered, not dropped:
// --drain promises in-flight requests their answers.
func TestShutdownDrainsQueuedRequests(t *testing.T) {
	hash, docs, idx := testParts()
	enc := &enginetest.GatedEncoder{Encoder: hash, Started: make(chan struct{}, 4), Release: make(chan struct{})}
	s := newServer(t, Config{})
	serveParts(t, s, enc, idx, docs, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	answers := make(chan string, 2)
	post := func() { postAsync(ln.Addr().String(), "/retrieve", `{"queries":["topic1"],"topk":2}`, answers) }
	post()
	<-enc.Started // the first request is being encoded
	post()
	for s.retriever.Load().Queued() < 2 { // the second is queued behind it
		time.Sleep(time.Millisecond)
	}
	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shutdown <- s.Shutdown(ctx)
	}()
	for { // Shutdown has begun once the listener is closed
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			break
		}
		c.Close()
		time.Sleep(time.Millisecond)
	}
	close(enc.Release)
	for range 2 {
		if got := <-answers; !strings.HasPrefix(got, "200 ") {
			t.Errorf("request during shutdown: %s, want 200", got)
		}
	}
	if err := <-shutdown; err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
