package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"needle/engine/enginetest"
)

// Over a real socket: limits fasthttp enforces before the handler still answer JSON.
func TestServeOverTCPLimits(t *testing.T) {
	s, _, _ := testServer(t, Config{MaxBodyBytes: 1024}, false)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	url := "http://" + ln.Addr().String()

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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// A request still queued in the engine when Shutdown starts is answered, not dropped:
// --drain promises in-flight requests their answers.
func TestShutdownDrainsQueuedRequests(t *testing.T) {
	hash, docs, idx := testParts()
	enc := &enginetest.GatedEncoder{Encoder: hash, Started: make(chan struct{}, 4), Release: make(chan struct{})}
	s := New(Config{})
	serveParts(t, s, enc, idx, docs, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	url := "http://" + ln.Addr().String() + "/retrieve"
	answers := make(chan string, 2)
	post := func() {
		resp, err := http.Post(url, "application/json", strings.NewReader(`{"queries":["topic1"],"topk":2}`))
		if err != nil {
			answers <- err.Error()
			return
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		answers <- fmt.Sprintf("%d %s", resp.StatusCode, out)
	}
	go post()
	<-enc.Started // the first request is being encoded
	go post()
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
