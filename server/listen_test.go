package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
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
