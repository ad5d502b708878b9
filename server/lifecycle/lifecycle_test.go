package lifecycle

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"needle/engine"
	"needle/internal/option"
	"needle/internal/writer"
	"needle/server"
	"needle/testkit/enginetest"
)

func TestAdvertisedIP(t *testing.T) {
	if got := advertisedIP("127.0.0.1"); got != "127.0.0.1" {
		t.Errorf("advertisedIP(127.0.0.1) = %s", got)
	}
	if got := advertisedIP("0.0.0.0"); got == "0.0.0.0" || got == "" {
		t.Errorf("advertisedIP(0.0.0.0) = %q, want a dialable address", got)
	}
}

// TestRun takes a process through its life with fake engine parts: /health answers and the
// address file exists while the retriever loads (requests are held), /retrieve answers once
// it is ready, and a stop signal drains and withdraws the address file (removed: another
// server's file keeps the folder from being empty).
func TestRun(t *testing.T) {
	enc := &enginetest.HashEncoder{Dimension: 8}
	docs, idx := enginetest.Corpus(enc, []string{"a needle is a pin", "rivers flow"})
	dir := t.TempDir()
	other := filepath.Join(dir, "Host127.0.0.2_IP9.txt")
	if err := os.WriteFile(other, []byte("127.0.0.2:9"), 0o644); err != nil {
		t.Fatal(err)
	}
	loading, stop := make(chan struct{}), make(chan os.Signal, 1)
	var log strings.Builder
	srv, err := server.New(option.Defaults[server.Config]())
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{Host: "127.0.0.1", SaveAddressTo: dir, Drain: time.Minute, WatchInterval: time.Second, IndexName: "fake", Log: &writer.Locked{W: &log}, Stop: stop}
	done := make(chan error, 1)
	go func() {
		done <- Run(opt, srv, func() (*engine.Retriever, error) {
			<-loading
			return engine.NewRetriever(enc, idx, docs, nil, "", enginetest.Batcher(engine.BatcherOptions{}))
		})
	}()
	var addr string
	for deadline := time.Now().Add(30 * time.Second); addr == ""; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no address file within 30 s")
		}
		files, _ := filepath.Glob(filepath.Join(dir, "Host127.0.0.1_IP*.txt"))
		if len(files) == 1 {
			b, _ := os.ReadFile(files[0])
			addr = string(b)
		}
	}
	if resp, err := http.Get("http://" + addr + "/health"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /health while loading: %v %v", resp, err)
	}
	answered := make(chan int, 1)
	go func() { // held until ready
		resp, err := http.Post("http://"+addr+"/retrieve", "application/json", strings.NewReader(`{"queries":["needle"]}`))
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	for !strings.Contains(get(t, "http://"+addr+"/metrics"), "needle_held_requests 1\n") {
		time.Sleep(time.Millisecond) // until the request is held
	}
	close(loading)
	if code := <-answered; code != 200 {
		t.Fatalf("POST /retrieve held while loading: %d, want 200", code)
	}
	stop <- syscall.SIGTERM
	if err := <-done; err != nil {
		t.Fatalf("Run after SIGTERM: %v\n%s", err, log.String())
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "Host*_IP*.txt")); len(files) != 1 || files[0] != other {
		t.Errorf("address files after the drain: %v, want only the other server's", files)
	}
	if _, err := http.Get("http://" + addr + "/health"); err == nil {
		t.Error("the port still answers after Run returned")
	}
}

// get returns the body of a GET of url.
func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
