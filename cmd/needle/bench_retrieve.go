package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

func init() {
	registerBench(benchmark{name: "retrieve", summary: "load-test a /retrieve server (needle or the Python anchor): QPS, p50/p99, errors", run: runBenchRetrieve})
}

// retrieveLoad is one load test: concurrency callers, each POSTing batch queries per
// request, until duration has passed or requests were sent.
type retrieveLoad struct {
	url          string
	concurrency  int
	duration     time.Duration
	requests     int
	batch, topk  int
	returnScores bool
	timeout      time.Duration
	serverPID    int // if > 0, the server's CPU time during the run is reported
}

// loadResult is what the callers saw. latencies are per request, in send order per caller.
type loadResult struct {
	latencies []time.Duration
	queries   int
	errors    map[string]int
	elapsed   time.Duration
	cpu       time.Duration // server process CPU time (user+sys) during the run, if known
}

func runBenchRetrieve(args []string) error {
	var l retrieveLoad
	fs := newFlagSet("bench retrieve", "--url URL --queries FILE [flags]\n\n"+
		"Sends POST /retrieve requests from --concurrency callers (each waits for its answer before\n"+
		"sending the next) until --duration passes or --requests were sent, then prints queries/s,\n"+
		"requests/s, latency percentiles and errors. Works against needle serve and bench/anchor_server.py.")
	fs.StringVar(&l.url, "url", "http://127.0.0.1:8000", "server base URL (/retrieve is appended)")
	queriesFile := fs.String("queries", "", "queries file: JSONL with a \"query\" (or \"question\") string per line, or plain text, one query per line (required)")
	fs.IntVar(&l.concurrency, "concurrency", 64, "concurrent callers")
	fs.DurationVar(&l.duration, "duration", 20*time.Second, "how long to send requests (the run also stops after --requests)")
	fs.IntVar(&l.requests, "requests", 0, "stop after this many requests in total (0 = only --duration limits)")
	fs.IntVar(&l.batch, "batch", 1, "queries per request (Search-R1 sends up to 2560 in one POST)")
	fs.IntVar(&l.topk, "topk", 3, "topk sent with each request")
	fs.BoolVar(&l.returnScores, "return-scores", true, "return_scores sent with each request")
	fs.DurationVar(&l.timeout, "timeout", 120*time.Second, "per-request timeout (a timeout counts as an error)")
	fs.IntVar(&l.serverPID, "server-pid", 0, "process id of the server (same machine): also report its CPU seconds per 1000 queries, a figure that holds on a busy shared machine where QPS depends on the CPU share")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *queriesFile == "" {
		return errors.New("--queries is required")
	}
	if l.concurrency <= 0 || l.batch <= 0 || l.duration <= 0 {
		return errors.New("--concurrency, --batch and --duration must be > 0")
	}
	queries, err := readQueryTexts(*queriesFile)
	if err != nil {
		return err
	}
	res, err := l.run(queries)
	if err != nil {
		return err
	}
	res.print(os.Stdout, l)
	return nil
}

// readQueryTexts reads query strings from JSONL ("query" or "question" field) or plain lines.
func readQueryTexts(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		if text[0] == '{' {
			var q struct{ Query, Question string }
			if err := json.Unmarshal([]byte(text), &q); err != nil {
				return nil, fmt.Errorf("%s line %d: %w", path, line, err)
			}
			text = q.Query + q.Question
		}
		out = append(out, text)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no queries", path)
	}
	return out, nil
}

// body returns the JSON request of batch queries starting at query number first.
func (l *retrieveLoad) body(queries []string, first int) []byte {
	batch := make([]string, l.batch)
	for i := range batch {
		batch[i] = queries[(first+i)%len(queries)]
	}
	b, _ := json.Marshal(map[string]any{"queries": batch, "topk": l.topk, "return_scores": l.returnScores})
	return b
}

func (l *retrieveLoad) run(queries []string) (*loadResult, error) {
	client := &fasthttp.Client{MaxConnsPerHost: l.concurrency, ReadTimeout: l.timeout, WriteTimeout: l.timeout,
		MaxResponseBodySize: 1 << 30}
	url := strings.TrimRight(l.url, "/") + "/retrieve"
	// A first request checks the URL before the clock starts.
	if status, _, err := client.Post(nil, url, nil); err != nil || status == fasthttp.StatusNotFound {
		return nil, fmt.Errorf("%s: status %d, %v", url, status, err)
	}
	cpuBefore, err := serverCPU(l.serverPID)
	if err != nil {
		return nil, err
	}
	var (
		mu    sync.Mutex
		res   = &loadResult{errors: map[string]int{}}
		sent  int
		wg    sync.WaitGroup
		start = time.Now()
		end   = start.Add(l.duration)
	)
	// next reserves one request, or returns false when the run is over.
	next := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if time.Now().After(end) || (l.requests > 0 && sent >= l.requests) {
			return 0, false
		}
		sent++
		return sent - 1, true
	}
	for range l.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI(url)
			req.Header.SetMethod("POST")
			req.Header.SetContentType("application/json")
			for {
				n, ok := next()
				if !ok {
					return
				}
				req.SetBody(l.body(queries, n*l.batch))
				t0 := time.Now()
				err := client.DoTimeout(req, resp, l.timeout)
				took := time.Since(t0)
				kind := ""
				switch {
				case err != nil:
					kind = err.Error()
				case resp.StatusCode() != 200:
					kind = fmt.Sprintf("HTTP %d", resp.StatusCode())
				case !bytes.HasPrefix(resp.Body(), []byte(`{"result":`)):
					kind = "200 without a result"
				}
				mu.Lock()
				if kind != "" {
					res.errors[kind]++
				} else {
					res.latencies = append(res.latencies, took)
					res.queries += l.batch
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	cpuAfter, err := serverCPU(l.serverPID)
	res.cpu = cpuAfter - cpuBefore
	return res, err
}

// serverCPU returns the user+system CPU time of process pid (0: none) from /proc.
func serverCPU(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, nil
	}
	path := fmt.Sprintf("/proc/%d/stat", pid)
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("--server-pid: %w", err)
	}
	// Fields after the parenthesized command name; utime and stime are fields 14 and 15.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0, fmt.Errorf("--server-pid: cannot parse %s", path)
	}
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond, nil
}

func (r *loadResult) print(w *os.File, l retrieveLoad) {
	slices.Sort(r.latencies)
	pct := func(p float64) float64 {
		if len(r.latencies) == 0 {
			return 0
		}
		return r.latencies[min(len(r.latencies)-1, int(p*float64(len(r.latencies))))].Seconds() * 1000
	}
	nerr := 0
	for _, n := range r.errors {
		nerr += n
	}
	sec := r.elapsed.Seconds()
	fmt.Fprintf(w, "url %s  concurrency %d  batch %d  topk %d  return_scores %v\n", l.url, l.concurrency, l.batch, l.topk, l.returnScores)
	fmt.Fprintf(w, "ok requests %d  queries %d  errors %d  in %.2fs\n", len(r.latencies), r.queries, nerr, sec)
	fmt.Fprintf(w, "queries/s %.1f  requests/s %.1f\n", float64(r.queries)/sec, float64(len(r.latencies))/sec)
	fmt.Fprintf(w, "latency ms  p50 %.1f  p90 %.1f  p99 %.1f  max %.1f\n", pct(.50), pct(.90), pct(.99), pct(1))
	if l.serverPID > 0 && r.queries > 0 {
		fmt.Fprintf(w, "server CPU %.2fs = %.3f CPU-s per 1000 queries\n", r.cpu.Seconds(), r.cpu.Seconds()*1000/float64(r.queries))
	}
	for kind, n := range r.errors {
		fmt.Fprintf(w, "error %q x%d\n", kind, n)
	}
}
