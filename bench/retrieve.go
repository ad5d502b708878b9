package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"needle/bench/plot"
	"needle/internal/option"
)

// RetrieveOptions are the flags of `needle bench retrieve`: one load test of Concurrency
// callers, each POSTing Batch queries per request, until Duration has passed or Requests
// were sent.
type RetrieveOptions struct {
	URL          string        // server base URL; /retrieve is appended
	QueriesFile  string        // JSONL with a "query" (or "question") per line, or plain lines
	Trace        string        // a trace (bench trace) replayed once in order, instead of QueriesFile
	Concurrency  int           // concurrent callers
	Duration     time.Duration // how long to send requests
	Requests     int           // stop after this many requests in total (0: only Duration limits)
	Batch, TopK  int           // queries per request; topk sent with each
	ReturnScores bool          // return_scores sent with each request
	Timeout      time.Duration // per-request timeout (a timeout counts as an error)
	ServerPID    int           // if > 0, the server's CPU time during the run is reported
	// Fairness, when its Run is set, runs the fairness measurement (fairness.go) instead of a
	// load test; Concurrency, Duration, Requests, Batch and Trace do not apply (ServerPID: the
	// server's CPU split between the POST and the singles).
	Fairness FairnessOptions
	Plot     string // if set, the load test's latencies and queries/s are drawn into this .svg or .png file
}

// Specs declares the options (`needle bench retrieve`'s flags), Fairness's among them.
func (o *RetrieveOptions) Specs() option.Specs {
	return append(o.loadTest(), o.Fairness.Specs().Under("Fairness.")...)
}

// check refuses the options their specs do not take; Fairness's only for a Fairness run.
func (o RetrieveOptions) check() error {
	if o.Fairness.Run {
		return o.Specs().Check()
	}
	return o.loadTest().Check()
}

// loadTest declares the options but Fairness's.
func (o *RetrieveOptions) loadTest() option.Specs {
	return option.Specs{
		option.String(&o.URL, "URL", "url", "http://127.0.0.1:8000", "server base URL (/retrieve is appended)"),
		option.String(&o.QueriesFile, "QueriesFile", "queries", "", "queries file: JSONL with a \"query\" (or \"question\") string per line, or plain text, one query per line (required)"),
		option.String(&o.Trace, "Trace", "trace", "", "a trace written by `needle bench trace`, replayed once in order (instead of --queries; --duration and --requests do not apply)"),
		option.Num(&o.Concurrency, "Concurrency", "concurrency", 64, option.Above(0), "concurrent callers"),
		option.Num(&o.Duration, "Duration", "duration", 20*time.Second, option.Above(0), "how long to send requests (the run also stops after --requests)"),
		option.Num(&o.Requests, "Requests", "requests", 0, option.From(0), "stop after this many requests in total (0 = only --duration limits)"),
		option.Num(&o.Batch, "Batch", "batch", 1, option.Above(0), "queries per request (Search-R1 sends up to 2560 in one POST)"),
		option.Num(&o.TopK, "TopK", "topk", 3, option.Above(0), "topk sent with each request"),
		option.Bool(&o.ReturnScores, "ReturnScores", "return-scores", true, "return_scores sent with each request"),
		option.Num(&o.Timeout, "Timeout", "timeout", 120*time.Second, option.Above(0), "per-request timeout (a timeout counts as an error)"),
		option.Num(&o.ServerPID, "ServerPID", "server-pid", 0, option.From(0), "process id of the server (same machine): also report its CPU seconds per 1000 queries, a figure that holds on a busy shared machine where QPS depends on the CPU share (with --fairness: its CPU during each POST alone and with the singles, and the POST's share of it)"),
		plotSpec(&o.Plot),
	}
}

// loadResult is what the callers saw. latencies are per request, in send order per caller.
type loadResult struct {
	latencies []time.Duration
	finished  []plot.Finish // when each answered request finished, for --plot
	queries   int
	errors    map[string]int
	elapsed   time.Duration
	cpu       time.Duration // server process CPU time (user+sys) during the run, if known
	// cache counts the server's result cache lookups during the run (its /metrics before
	// and after; other clients of the server count too).
	cache cacheCounters
}

// Retrieve load-tests a /retrieve server (needle serve or bench/anchor_server.py) and writes
// queries/s, requests/s, latency percentiles and errors to w, and the server's result cache
// hit rate when its /metrics has one. With a trace, each of its queries is sent once, in
// order, and the run ends with the trace.
func Retrieve(w io.Writer, opt RetrieveOptions) error {
	path := opt.QueriesFile
	if opt.Trace != "" {
		path = opt.Trace
	}
	if (opt.QueriesFile == "") == (opt.Trace == "") {
		return fmt.Errorf("one of two: %w", errors.Join(option.Errorf("QueriesFile", "%q", opt.QueriesFile), option.Errorf("Trace", "%q", opt.Trace)))
	}
	if err := opt.check(); err != nil {
		return err
	}
	if opt.Plot != "" {
		if opt.Fairness.Run {
			return option.Errorf("Plot", "draws load tests, not a Fairness run")
		}
		if err := plot.Check(opt.Plot); err != nil {
			return err
		}
	}
	queries, err := readQueryTexts(path)
	if err != nil {
		return err
	}
	if opt.Fairness.Run {
		if opt.Trace != "" {
			return option.Errorf("Trace", "a Fairness run takes QueriesFile, not a trace")
		}
		return opt.fairness(w, queries)
	}
	if opt.Trace != "" {
		opt.Requests = (len(queries) + opt.Batch - 1) / opt.Batch
		opt.Duration = 24 * time.Hour
	}
	res, err := opt.run(queries)
	if err != nil {
		return err
	}
	res.print(w, opt)
	if opt.Trace != "" {
		fmt.Fprintf(w, "trace %s: %d queries, %.1f%% repeat an earlier one (the hit rate of a cache that keeps everything)\n",
			opt.Trace, len(queries), 100*repeatRate(queries))
	}
	if opt.Plot == "" {
		return nil
	}
	return plot.Write(opt.Plot, plot.Figure{
		Title:     fmt.Sprintf("needle bench retrieve: concurrency %d, batch %d, topk %d", opt.Concurrency, opt.Batch, opt.TopK),
		Latencies: []plot.Latencies{{Of: "request", D: res.latencies}},
		Finished:  res.finished,
	})
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

// batch returns the l.Batch queries of a request starting at query number first: cycling
// through queries, or the trace's next ones (fewer at its end).
func (l *RetrieveOptions) batch(queries []string, first int) []string {
	if l.Trace != "" {
		return queries[first:min(first+l.Batch, len(queries))]
	}
	batch := make([]string, l.Batch)
	for i := range batch {
		batch[i] = queries[(first+i)%len(queries)]
	}
	return batch
}

// body returns the JSON request of queries.
func (l *RetrieveOptions) body(queries []string) []byte {
	b, _ := json.Marshal(map[string]any{"queries": queries, "topk": l.TopK, "return_scores": l.ReturnScores})
	return b
}

// cacheCounters are the server's result cache lookups from its /metrics.
type cacheCounters struct{ hits, misses, coalesced uint64 }

// readCacheCounters reads needle_cache_{hits,misses,coalesced}_total from the server's
// /metrics; ok is false when it has no hits and misses (the anchor, an older needle).
func readCacheCounters(client *fasthttp.Client, base string) (c cacheCounters, ok bool) {
	status, body, err := client.Get(nil, base+"/metrics")
	if err != nil || status != fasthttp.StatusOK {
		return c, false
	}
	found := 0
	read := func(line, name string, dst *uint64) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			if _, err := fmt.Sscan(v, dst); err == nil {
				found++
			}
		}
	}
	for _, line := range strings.Split(string(body), "\n") {
		read(line, "needle_cache_hits_total", &c.hits)
		read(line, "needle_cache_misses_total", &c.misses)
		read(line, "needle_cache_coalesced_total", &c.coalesced)
	}
	return c, found >= 2
}

func (l *RetrieveOptions) run(queries []string) (*loadResult, error) {
	client := &fasthttp.Client{MaxConnsPerHost: l.Concurrency, ReadTimeout: l.Timeout, WriteTimeout: l.Timeout,
		MaxResponseBodySize: 1 << 30}
	base := strings.TrimRight(l.URL, "/")
	url := base + "/retrieve"
	if err := checkRetrieveURL(client, url); err != nil {
		return nil, err
	}
	cpuBefore, err := serverCPU(l.ServerPID)
	if err != nil {
		return nil, err
	}
	cacheBefore, cacheOK := readCacheCounters(client, base)
	var (
		mu    sync.Mutex
		res   = &loadResult{errors: map[string]int{}}
		sent  int
		wg    sync.WaitGroup
		start = time.Now()
		end   = start.Add(l.Duration)
	)
	// next reserves one request, or returns false when the run is over.
	next := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if time.Now().After(end) || (l.Requests > 0 && sent >= l.Requests) {
			return 0, false
		}
		sent++
		return sent - 1, true
	}
	for range l.Concurrency {
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
				batch := l.batch(queries, n*l.Batch)
				req.SetBody(l.body(batch))
				t0 := time.Now()
				err := client.DoTimeout(req, resp, l.Timeout)
				took := time.Since(t0)
				if err == nil {
					err = answerError(resp)
				}
				mu.Lock()
				if err != nil {
					res.errors[err.Error()]++
				} else {
					res.latencies = append(res.latencies, took)
					res.finished = append(res.finished, plot.Finish{At: time.Since(start), Queries: len(batch)})
					res.queries += len(batch)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	if after, ok := readCacheCounters(client, base); ok && cacheOK {
		res.cache = cacheCounters{after.hits - cacheBefore.hits, after.misses - cacheBefore.misses, after.coalesced - cacheBefore.coalesced}
	}
	cpuAfter, err := serverCPU(l.ServerPID)
	res.cpu = cpuAfter - cpuBefore
	return res, err
}

// checkRetrieveURL sends a first request, before the clock starts, to check the URL.
func checkRetrieveURL(client *fasthttp.Client, url string) error {
	if status, _, err := client.Post(nil, url, nil); err != nil || status == fasthttp.StatusNotFound {
		return fmt.Errorf("%s: status %d, %v", url, status, err)
	}
	return nil
}

// serverCPU returns the user+system CPU time of process pid (0: none) from /proc.
func serverCPU(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, nil
	}
	path := fmt.Sprintf("/proc/%d/stat", pid)
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, option.Wrap("ServerPID", err)
	}
	// Fields after the parenthesized command name; utime and stime are fields 14 and 15.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0, option.Errorf("ServerPID", "cannot parse %s", path)
	}
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond, nil
}

func (r *loadResult) print(w io.Writer, l RetrieveOptions) {
	slices.Sort(r.latencies)
	pct := func(p float64) float64 { return percentileMs(r.latencies, p) }
	nerr := 0
	for _, n := range r.errors {
		nerr += n
	}
	sec := r.elapsed.Seconds()
	fmt.Fprintf(w, "url %s  concurrency %d  batch %d  topk %d  return_scores %v\n", l.URL, l.Concurrency, l.Batch, l.TopK, l.ReturnScores)
	fmt.Fprintf(w, "ok requests %d  queries %d  errors %d  in %.2fs\n", len(r.latencies), r.queries, nerr, sec)
	fmt.Fprintf(w, "queries/s %.1f  requests/s %.1f\n", float64(r.queries)/sec, float64(len(r.latencies))/sec)
	fmt.Fprintf(w, "latency ms  p50 %.1f  p90 %.1f  p99 %.1f  max %.1f\n", pct(.50), pct(.90), pct(.99), pct(1))
	if l.ServerPID > 0 && r.queries > 0 {
		fmt.Fprintf(w, "server CPU %.2fs = %.3f CPU-s per 1000 queries\n", r.cpu.Seconds(), r.cpu.Seconds()*1000/float64(r.queries))
	}
	if c := r.cache; c.hits+c.misses > 0 {
		fmt.Fprintf(w, "cache hit rate %.1f%% (server /metrics: %d hits, %d misses of which %d waited for an identical search in flight)\n",
			100*float64(c.hits)/float64(c.hits+c.misses), c.hits, c.misses, c.coalesced)
	}
	for kind, n := range r.errors {
		fmt.Fprintf(w, "error %q x%d\n", kind, n)
	}
}
