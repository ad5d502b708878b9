package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
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

	"needle/testkit/testenv"
)

// script is an e2e/clients script that runs its loops until its stop file exists, then
// prints its result as JSON.
type script struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan error
	stopFile       string
}

// startScript starts cmd, whose arguments name stopFile (killed when the test ends).
func startScript(t *testing.T, cmd *exec.Cmd, stopFile string) *script {
	s := &script{cmd: cmd, done: make(chan error, 1), stopFile: stopFile}
	cmd.Stdout, cmd.Stderr = &s.stdout, &s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		s.done <- <-s.done
	})
	return s
}

// stop writes the stop file, waits for the loops to end their calls in flight and decodes
// what the script printed into out; a crash (an exception out of a client) fails the test.
func (s *script) stop(t *testing.T, out any) {
	if err := os.WriteFile(s.stopFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		s.done <- err
		if err != nil {
			t.Fatalf("a client crashed: %v\n%s", err, s.stderr.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("clients still running 3 minutes after the stop file\n%s", s.stderr.String())
	}
	if err := json.Unmarshal(s.stdout.Bytes(), out); err != nil {
		t.Fatalf("%s printed %.300q: %v\n%s", s.cmd.Args, s.stdout.String(), err, s.stderr.String())
	}
}

// clientLoops is e2e/clients/lifecycle.py running the named trainers' clients in loops
// against a needle on addr (and through the address folder addrDir).
type clientLoops struct {
	*script
	names []string
}

// startClients starts the loops of the named clients (workers loops each; Search-R1: one).
func startClients(t *testing.T, fx *fixture, addrDir, addr string, workers int, names ...string) *clientLoops {
	stopFile := filepath.Join(t.TempDir(), "stop")
	cmd := exec.Command(testenv.Python(t), "clients/lifecycle.py", filepath.Join(testenv.Cache(), "clients"), addrDir, addr,
		writeJSON(t, fx.queries), stopFile, fmt.Sprint(workers), strings.Join(names, ","))
	return &clientLoops{script: startScript(t, cmd, stopFile), names: names}
}

// finish stops the loops and checks that no client crashed and no call failed; it returns
// the calls answered by client.
func (c *clientLoops) finish(t *testing.T) map[string]int {
	var stats map[string]struct{ OK, Failed int }
	c.stop(t, &stats)
	answered := map[string]int{}
	for _, name := range c.names {
		if s := stats[name]; s.OK == 0 || s.Failed != 0 {
			t.Errorf("%s: %d answered, %d failed calls; want answers and no failure\n%s", name, s.OK, s.Failed, c.stderr.String())
		}
		answered[name] = stats[name].OK
	}
	return answered
}

// launchStopped launches needle on port and stops it (SIGSTOP) between its address file and
// its readiness, while the clients start: their first calls wait in the listen backlog and
// then meet the loading server. cont resumes it.
func (fx *fixture) launchStopped(t *testing.T, addrDir string, port int) (s *server, cont func()) {
	s = fx.launch(t, addrDir, port)
	s.cmd.Process.Signal(syscall.SIGSTOP)
	return s, func() {
		time.Sleep(3 * time.Second)
		s.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// The trainers' clients that retry (verl's and RLinf's own code, ASearcher's restated) run in
// loops while needle starts under them (address file written, index not loaded), drains on
// SIGTERM, is gone for 12 s and comes back on the same port: no client crashes and no call
// fails (they retry through refused connections and the gap).
func testClientsSurviveLifecycle(t *testing.T, fx *fixture) {
	port := freePort(t)
	addrDir := filepath.Join(t.TempDir(), "addresses")
	a, cont := fx.launchStopped(t, addrDir, port)
	clients := startClients(t, fx, addrDir, a.addr, 4, "verl", "rlinf", "asearcher")
	cont()
	a.waitReady(t)
	time.Sleep(12 * time.Second) // past the clients' retry sleeps
	t.Logf("first server: retrieve answers 200: %s, 503: %q (requests that came while loading were held)",
		a.metric(t, `needle_requests_total{endpoint="retrieve",code="200"}`), a.metric(t, `needle_requests_total{endpoint="retrieve",code="503"}`))
	a.stop(t) // drains; its address file stays: the folder's only one
	// No server for longer than ASearcher's 10 s between attempts: its clients fail once
	// more and re-read the folder while nothing listens.
	time.Sleep(12 * time.Second)
	b := fx.launch(t, addrDir, port)
	b.waitReady(t)
	time.Sleep(25 * time.Second) // RLinf's and ASearcher's clients retry 10 s apart
	answered := clients.finish(t)
	t.Logf("calls answered across start, drain and restart: %v; second server answered %s", answered,
		b.metric(t, `needle_requests_total{endpoint="retrieve",code="200"}`))
	b.stop(t)
}

// Search-R1's call (no timeout, no retry) with the three others, while needle starts under
// them (requests that come while loading are held, not refused with 503) and while a second
// needle replaces it on the same port (--replace: the first serves until the second is
// ready, then drains and exits; no connection is refused in between): no call fails, and
// the first server never answered 503.
func testClientsSurviveReplace(t *testing.T, fx *fixture) {
	port := freePort(t)
	addrDir := filepath.Join(t.TempDir(), "addresses")
	a, cont := fx.launchStopped(t, addrDir, port)
	clients := startClients(t, fx, addrDir, a.addr, 2, "searchr1", "verl", "rlinf", "asearcher")
	cont()
	a.waitReady(t)
	time.Sleep(5 * time.Second)
	first200 := a.metric(t, `needle_requests_total{endpoint="retrieve",code="200"}`)
	if n := a.metric(t, `needle_requests_total{endpoint="retrieve",code="503"}`); n != "" {
		t.Errorf("the first server answered 503 %s times while loading; want the requests held", n)
	}
	b := fx.launch(t, addrDir, port, "--replace") // returns once it serves: its address file is written when ready
	if err := a.waitExit(t); err != nil {
		t.Errorf("the replaced server: %v\n%s", err, a.log)
	}
	if !strings.Contains(a.log.String(), "serves on") || !strings.Contains(b.log.String(), "replacing pid") {
		t.Errorf("no handover in the logs\nfirst:\n%s\nsecond:\n%s", a.log, b.log)
	}
	time.Sleep(5 * time.Second)
	answered := clients.finish(t)
	t.Logf("calls answered across a held start and a replacement: %v; first server answered %s before the replacement, second %s",
		answered, first200, b.metric(t, `needle_requests_total{endpoint="retrieve",code="200"}`))
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

// waitExit waits up to a minute for the process to exit and returns its error.
func (s *server) waitExit(t *testing.T) error {
	select {
	case err := <-s.exited:
		s.exited <- err // for the cleanup
		return err
	case <-time.After(time.Minute):
		// An error, not t.Fatalf: signalExit runs on goroutines of its own, where Fatalf
		// would end only that goroutine and leave the test waiting for its answer forever.
		return errors.New("needle serve still running a minute after it was told to exit")
	}
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
	t.Logf("2,560-query POST disconnected: %d of its queries dropped (never encoded, or stopped part way), %v started; single query %v idle (best of 5), %v right after the disconnect",
		dropped, encoded-before-1, idle, after)
	srv.stop(t)
}

// Search-R1's one POST of 2,560 queries is in flight when SIGTERM comes: it is answered in
// full (the drain), and the server's address file, one of two in the folder, is gone from the
// moment the drain begins (before its port refuses connections), not at exit. On another
// server a second SIGTERM during the drain exits at once.
func testSignals(t *testing.T, fx *fixture) {
	addrDir := filepath.Join(t.TempDir(), "addresses")
	other := fx.launch(t, addrDir, 0)
	srv := fx.launch(t, addrDir, 0, "--drain", "10m") // a shared 2-core machine may take minutes
	other.waitReady(t)
	srv.waitReady(t)
	c := postQueries(t, fx, srv.addr, 2560)
	defer c.Close()
	srv.waitMetric(t, "needle_batch_queries_count", func(v float64) bool { return v >= 1 })
	exited := make(chan error, 1)
	go func() { exited <- srv.signalExit(t, syscall.SIGTERM) }()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(srv.log.String(), "removed "+srv.addressFile); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the address file was not removed when the drain began\n%s", srv.log)
		}
	}
	if _, err := os.Stat(srv.addressFile); !os.IsNotExist(err) {
		t.Errorf("address file of the draining server: %v, want it gone", err)
	}
	// ... while the server still drains: no byte of the POST's answer has come yet.
	c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the POST was answered (%v) before the address file was removed, want the file removed when the drain begins", err)
	}
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
	other.stop(t)

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

// A single query sent while a 2,560-query POST is being encoded is answered while most of the
// POST is still to be encoded (fair batching: it goes at the POST's next pause point, not
// behind it), and the POST is answered in full. Order only; the latency is logged.
func testSingleQueryOvertakesAPost(t *testing.T, fx *fixture) {
	srv := fx.start(t, "--cache-mb", "0")
	c := postQueries(t, fx, srv.addr, 2560)
	defer c.Close()
	srv.waitMetric(t, "needle_batch_queries_count", func(v float64) bool { return v >= 2 }) // the POST is being encoded
	began := time.Now()
	resp, err := http.Post("http://"+srv.addr+"/retrieve", "application/json", strings.NewReader(`{"queries":["`+fx.queries[0]+`"],"topk":3}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	took := time.Since(began)
	encoded, _ := strconv.ParseFloat(srv.metric(t, "needle_batch_queries_sum"), 64)
	if resp.StatusCode != 200 || encoded-1 >= 2560/2 {
		t.Errorf("single query: %d, answered when %v of the POST's 2,560 queries were encoded; want 200 before half of them", resp.StatusCode, encoded-1)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Minute))
	post, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Result [][]scored }
	err = json.NewDecoder(post.Body).Decode(&out)
	post.Body.Close()
	if post.StatusCode != 200 || err != nil || len(out.Result) != 2560 {
		t.Errorf("the POST: %d, %d lists (%v); want 200 with 2,560", post.StatusCode, len(out.Result), err)
	}
	t.Logf("single query answered in %v, when %v of the POST's queries were encoded; the POST's work paused %s times",
		took, encoded-1, srv.metric(t, "needle_bulk_pauses_total"))
	srv.stop(t)
}
