package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"needle/bench/plot"
	"needle/internal/option"
)

// FairnessOptions are the flags of `needle bench retrieve --fairness`: how much a big request
// (Search-R1's one POST per turn) delays the single queries sent meanwhile (ASearcher's
// rollouts), and how much those slow the big request down. Run it against a server with its
// result cache off (--cache-mb 0), or the repeated texts are answered from the cache.
type FairnessOptions struct {
	Post   int           // queries in the big POST
	Rate   float64       // single queries sent per second, at a steady rate (open loop)
	Rounds int           // rounds of: idle singles, then the POST alone and the POST with singles (order alternating)
	Idle   time.Duration // how long singles are sent to an idle server per round
}

// fairnessResult is what one fairness run saw.
type fairnessResult struct {
	idle, during []time.Duration // single-query latencies, idle and during the POST
	alone, with  []time.Duration // the POST's time without and with the singles, one per round
	errors       map[string]int  // failed single queries by kind
}

// fairness runs opt.Rounds rounds against l.URL and writes the report to w. The POST's texts
// are the first Post queries (cycling); singles cycle through the ones after them (through all
// of them when there are no more), so they do not repeat a text of the POST.
func (l *RetrieveOptions) fairness(w io.Writer, queries []string) error {
	f := *l.Fairness
	if err := errors.Join(option.Positive("Fairness.Post", f.Post), option.Positive("Fairness.Rate", f.Rate),
		option.Positive("Fairness.Rounds", f.Rounds), option.Positive("Fairness.Idle", f.Idle)); err != nil {
		return err
	}
	client := &fasthttp.Client{MaxConnsPerHost: 1 << 12, ReadTimeout: l.Timeout, WriteTimeout: l.Timeout, MaxResponseBodySize: 1 << 30}
	url := strings.TrimRight(l.URL, "/") + "/retrieve"
	if err := checkRetrieveURL(client, url); err != nil {
		return err
	}
	post := make([]string, f.Post)
	for i := range post {
		post[i] = queries[i%len(queries)]
	}
	res := &fairnessResult{errors: map[string]int{}}
	s := &singles{l: l, client: client, url: url, queries: queries, res: res}
	if len(queries) > f.Post {
		s.queries = queries[f.Post:]
	}
	for round := range f.Rounds {
		res.idle = append(res.idle, s.send(nil, f.Idle)...)
		for i := range 2 {
			withSingles := (i+round)%2 == 1 // rounds alternate which goes first
			took, lat, err := s.postDuring(post, withSingles)
			if err != nil {
				return err
			}
			if withSingles {
				res.with, res.during = append(res.with, took), append(res.during, lat...)
			} else {
				res.alone = append(res.alone, took)
			}
		}
	}
	res.print(w, l)
	return nil
}

// singles sends single-query requests at a steady rate and records their latencies.
type singles struct {
	l       *RetrieveOptions
	client  *fasthttp.Client
	url     string
	queries []string
	next    int // the query the next single asks (cycling through queries)
	res     *fairnessResult
	mu      sync.Mutex // guards res.errors
}

// send sends one single every 1/Rate seconds, each on its own without waiting for the ones
// before (a blocked server does not slow the sending), until stop is closed or d has passed
// (d = 0: only stop ends it); it returns the latencies of those answered.
func (s *singles) send(stop <-chan struct{}, d time.Duration) []time.Duration {
	tick := time.NewTicker(time.Duration(float64(time.Second) / s.l.Fairness.Rate))
	defer tick.Stop()
	var end <-chan time.Time
	if d > 0 {
		end = time.After(d)
	}
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		lat []time.Duration
	)
	for {
		select {
		case <-stop:
		case <-end:
		case <-tick.C:
			body := s.l.body([]string{s.queries[s.next%len(s.queries)]})
			s.next++
			wg.Add(1)
			go func() {
				defer wg.Done()
				took, err := s.do(body)
				if err != nil {
					s.mu.Lock()
					s.res.errors[err.Error()]++
					s.mu.Unlock()
					return
				}
				mu.Lock()
				lat = append(lat, took)
				mu.Unlock()
			}()
			continue
		}
		break
	}
	wg.Wait()
	return lat
}

// postDuring sends the POST, with singles at the steady rate until it is answered when
// withSingles; it returns the POST's time and the singles' latencies.
func (s *singles) postDuring(post []string, withSingles bool) (time.Duration, []time.Duration, error) {
	stop := make(chan struct{})
	sent := make(chan []time.Duration, 1)
	if withSingles {
		go func() { sent <- s.send(stop, 0) }()
	} else {
		sent <- nil
	}
	took, err := s.do(s.l.body(post))
	close(stop)
	lat := <-sent
	if err != nil {
		return 0, nil, fmt.Errorf("the POST of %d queries: %w", len(post), err)
	}
	return took, lat, nil
}

// do sends one /retrieve request and returns its latency, or what went wrong.
func (s *singles) do(body []byte) (time.Duration, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(s.url)
	req.Header.SetMethod("POST")
	req.Header.SetContentType("application/json")
	req.SetBody(body)
	t0 := time.Now()
	if err := s.client.DoTimeout(req, resp, s.l.Timeout); err != nil {
		return 0, err
	}
	took := time.Since(t0)
	return took, answerError(resp)
}

// answerError is nil for a 200 with a result, else says what the answer was.
func answerError(resp *fasthttp.Response) error {
	switch {
	case resp.StatusCode() != fasthttp.StatusOK:
		return fmt.Errorf("HTTP %d", resp.StatusCode())
	case !bytes.HasPrefix(resp.Body(), []byte(`{"result":`)):
		return fmt.Errorf("200 without a result")
	}
	return nil
}

func (r *fairnessResult) print(w io.Writer, l *RetrieveOptions) {
	f := *l.Fairness
	slices.Sort(r.idle)
	slices.Sort(r.during)
	idle99, during99 := percentileMs(r.idle, .99), percentileMs(r.during, .99)
	alone, with := median(r.alone), median(r.with)
	fmt.Fprintf(w, "fairness: url %s  POST of %d queries  single queries %g/s  %d rounds  topk %d  return_scores %v\n",
		l.URL, f.Post, f.Rate, f.Rounds, l.TopK, l.ReturnScores)
	fmt.Fprintf(w, "idle single queries: %d  p50 %.1f ms  p99 %.1f ms\n", len(r.idle), percentileMs(r.idle, .5), idle99)
	fmt.Fprintf(w, "single queries during the POST: %d  p50 %.1f ms  p99 %.1f ms  = %.2fx the idle p99\n",
		len(r.during), percentileMs(r.during, .5), during99, during99/idle99)
	fmt.Fprintf(w, "POST alone %s s (median %.2f)  with the singles %s s (median %.2f)  slowdown %+.1f%%\n",
		seconds(r.alone), alone.Seconds(), seconds(r.with), with.Seconds(), 100*(with.Seconds()/alone.Seconds()-1))
	for kind, n := range r.errors {
		fmt.Fprintf(w, "error %q x%d (single queries)\n", kind, n)
	}
}

// percentileMs is the p-quantile of sorted latencies in milliseconds (0 for none).
func percentileMs(sorted []time.Duration, p float64) float64 {
	return plot.Percentile(sorted, p).Seconds() * 1000
}

// median is the median of d (0 for none); d is not changed.
func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(d))
	return s[len(s)/2]
}

// seconds lists d in seconds, space-separated.
func seconds(d []time.Duration) string {
	parts := make([]string, len(d))
	for i, x := range d {
		parts[i] = fmt.Sprintf("%.2f", x.Seconds())
	}
	return strings.Join(parts, " ")
}
