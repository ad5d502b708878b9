package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"needle/internal/testenv"
)

// The trainers' clients (verl's and RLinf's own code, ASearcher's restated) run in loops
// while needle starts under them (address file written, index not loaded), drains on
// SIGTERM, is gone for 12 s and comes back on the same port: no client crashes and no call
// fails (they retry through 503, refused connections and the gap).
func testClientsSurviveLifecycle(t *testing.T, fx *fixture) {
	port := freePort(t)
	addrDir := filepath.Join(t.TempDir(), "addresses")
	stopFile := filepath.Join(t.TempDir(), "stop")
	a := fx.launch(t, addrDir, port)
	// Hold the server between its address file and its readiness while the clients start:
	// their first calls wait in the listen backlog and meet the loading server.
	a.cmd.Process.Signal(syscall.SIGSTOP)
	clients := exec.Command(testenv.Python(t), "clients/lifecycle.py", filepath.Join(testenv.Cache(), "clients"), addrDir, a.addr,
		writeJSON(t, fx.queries), stopFile, "4")
	var stdout, stderr bytes.Buffer
	clients.Stdout, clients.Stderr = &stdout, &stderr
	if err := clients.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- clients.Wait() }()
	t.Cleanup(func() {
		clients.Process.Kill()
		<-done
		done <- nil
	})
	time.Sleep(3 * time.Second)
	a.cmd.Process.Signal(syscall.SIGCONT)
	a.waitReady(t)
	time.Sleep(12 * time.Second) // past the clients' retry sleeps after the 503s
	t.Logf("first server: retrieve answers 200: %s, 503 while loading: %s", a.metric(t, `needle_requests_total{endpoint="retrieve",code="200"}`),
		a.metric(t, `needle_requests_total{endpoint="retrieve",code="503"}`))
	a.stop(t) // drains; its address file stays: the folder's only one
	// No server for longer than ASearcher's 10 s between attempts: its clients fail once
	// more and re-read the folder while nothing listens.
	time.Sleep(12 * time.Second)
	b := fx.launch(t, addrDir, port)
	b.waitReady(t)
	time.Sleep(25 * time.Second) // RLinf's and ASearcher's clients retry 10 s apart
	if err := os.WriteFile(stopFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Fatalf("a client crashed: %v\n%s", err, stderr.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("clients still running 3 minutes after the stop file\n%s", stderr.String())
	}
	var stats map[string]struct{ OK, Failed int }
	if err := json.Unmarshal(stdout.Bytes(), &stats); err != nil {
		t.Fatalf("lifecycle.py printed %q: %v\n%s", stdout.String(), err, stderr.String())
	}
	for _, name := range []string{"verl", "rlinf", "asearcher"} {
		if s := stats[name]; s.OK == 0 || s.Failed != 0 {
			t.Errorf("%s: %d answered, %d failed calls; want answers and no failure", name, s.OK, s.Failed)
		}
	}
	t.Logf("calls answered across start, drain and restart: %+v; second server answered %s", stats,
		b.metric(t, `needle_requests_total{endpoint="retrieve",code="200"}`))
	b.stop(t)
}

// postQueries sends one Search-R1-shaped POST of n distinct queries (the fixture's, then
// numbered repeats of them, so neither the result cache nor the batcher's dedupe folds them) on
// its own connection and returns the connection (the answer is read by the caller, or never).
func postQueries(t *testing.T, fx *fixture, addr string, n int) net.Conn {
	queries := make([]string, n)
	for i := range queries {
		queries[i] = fx.queries[i%len(fx.queries)]
		if round := i / len(fx.queries); round > 0 {
			queries[i] += fmt.Sprintf(" (%d)", round)
		}
	}
	body := must(json.Marshal(map[string]any{"queries": queries, "topk": 3, "return_scores": true}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /retrieve HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
	return c
}

// waitMetric polls a /metrics sample until ok accepts its value.
func (s *server) waitMetric(t *testing.T, sample string, ok func(float64) bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if v, err := strconv.ParseFloat(s.metric(t, sample), 64); err == nil && ok(v) {
			return
		}
	}
	t.Fatalf("%s never reached the awaited value\n%s", sample, s.log)
}

// A 2,560-query POST whose client goes away while it is encoded: the batches not started are
// dropped (counted), and a single query is answered. The latencies are logged, not checked;
// the result cache is off so that the single query is encoded every time.
func testDisconnectDropsQueries(t *testing.T, fx *fixture) {
	srv := fx.start(t, "--cache-mb", "0")
	single := func() time.Duration {
		began := time.Now()
		resp, err := http.Post("http://"+srv.addr+"/retrieve", "application/json", strings.NewReader(`{"queries":["`+fx.queries[0]+`"],"topk":3}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("single query: %d", resp.StatusCode)
		}
		return time.Since(began)
	}
	idle := single()
	for range 4 {
		idle = min(idle, single())
	}
	batches, _ := strconv.ParseFloat(srv.metric(t, "needle_batch_queries_count"), 64)
	before, _ := strconv.ParseFloat(srv.metric(t, "needle_batch_queries_sum"), 64)
	c := postQueries(t, fx, srv.addr, 2560)
	srv.waitMetric(t, "needle_batch_queries_count", func(v float64) bool { return v >= batches+2 }) // the POST is being encoded
	c.Close()
	srv.waitMetric(t, "needle_client_disconnects_total", func(v float64) bool { return v == 1 })
	after := single()
	srv.waitMetric(t, "needle_queue_queries", func(v float64) bool { return v == 0 })
	dropped, _ := strconv.Atoi(srv.metric(t, "needle_dropped_queries_total"))
	encoded, _ := strconv.ParseFloat(srv.metric(t, "needle_batch_queries_sum"), 64)
	// A batch stopped part way counts as started and as dropped, so the two cover the POST at least once.
	if postEncoded := int(encoded - before - 1); dropped == 0 || dropped+postEncoded < 2560 {
		t.Errorf("after the disconnect: %d queries dropped, %v encoded; want the unencoded part of the 2,560 dropped", dropped, encoded-before)
	}
	t.Logf("2,560-query POST disconnected: %d of its queries dropped (never encoded, or stopped between layers), %v started; single query %v idle (best of 5), %v right after the disconnect",
		dropped, encoded-before-1, idle, after)
	srv.stop(t)
}

// Search-R1's one POST of 2,560 queries is in flight when SIGTERM comes: it is answered in
// full (the drain). On another server a second SIGTERM during the drain exits at once.
func testSignals(t *testing.T, fx *fixture) {
	srv := fx.start(t, "--drain", "10m") // a shared 2-core machine may take minutes
	c := postQueries(t, fx, srv.addr, 2560)
	defer c.Close()
	srv.waitMetric(t, "needle_batch_queries_count", func(v float64) bool { return v >= 1 })
	exited := make(chan error, 1)
	go func() { exited <- srv.signalExit(t, syscall.SIGTERM) }()
	c.SetReadDeadline(time.Now().Add(5 * time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the in-flight POST during the drain: %v\n%s", err, srv.log)
	}
	var out struct{ Result [][]scored }
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if resp.StatusCode != 200 || err != nil || len(out.Result) != 2560 {
		t.Errorf("the in-flight POST during the drain: %d, %d lists (%v); want 200 with 2,560", resp.StatusCode, len(out.Result), err)
	}
	if err := <-exited; err != nil {
		t.Errorf("exit after the drain: %v\n%s", err, srv.log)
	}

	srv = fx.start(t, "--drain", "10m")
	c2 := postQueries(t, fx, srv.addr, 2560)
	defer c2.Close()
	srv.waitMetric(t, "needle_batch_queries_count", func(v float64) bool { return v >= 1 })
	srv.cmd.Process.Signal(syscall.SIGTERM)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(srv.log.String(), "draining"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no drain began\n%s", srv.log)
		}
	}
	began := time.Now()
	err = srv.signalExit(t, syscall.SIGINT)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(srv.log.String(), "second interrupt: exiting without waiting") {
		t.Errorf("second signal: exit %v after %v, want exit status 1 and a log line\n%s", err, time.Since(began), srv.log)
	}
}
