package bench

import (
	"bytes"
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
// result cache off (--cache-mb 0), or the repeated texts are answered from the cache, unless
// InPost asks for the cache's case.
type FairnessOptions struct {
	Run     bool          // measure fairness instead of a load test
	Post    int           // queries in the big POST
	Rate    float64       // single queries sent per second, at a steady rate (open loop)
	Workers int           // > 0: singles come from this many workers, each sending its next when answered (closed loop: the saturated case), instead of at Rate
	Rounds  int           // rounds of: idle singles, then the POST alone and the POST with singles (order alternating)
	Idle    time.Duration // how long singles are sent to an idle server per round
	// InPost is the result cache's case (a server with its cache on): every POST asks texts no
	// request asked before, and the singles sent during it ask the POST's own texts, from its
	// end (still in flight); the idle singles ask texts no POST asks.
	InPost bool
}

// Specs declares the options.
func (o *FairnessOptions) Specs() option.Specs {
	return option.Specs{
		option.Bool(&o.Run, "Run", "fairness", false, "measure how a big POST delays single queries sent meanwhile, and how they slow it (see above)"),
		option.Num(&o.Post, "Post", "post", 2560, option.Above(0), "with --fairness: queries in the big POST (Search-R1's one POST per turn)"),
		option.Num(&o.Rate, "Rate", "rate", 10, option.Above(0), "with --fairness: single queries per second, sent at a steady rate whether or not the earlier ones were answered"),
		option.Num(&o.Workers, "Workers", "workers", 0, option.From(0), "with --fairness: send singles from this many workers, each sending its next when answered (the saturated case), instead of at --rate"),
		option.Bool(&o.InPost, "InPost", "singles-in-post", false, "with --fairness, for a server with its result cache on: each POST asks new texts and the singles during it ask the POST's own texts (from its end)"),
		option.Num(&o.Rounds, "Rounds", "rounds", 3, option.Above(0), "with --fairness: rounds"),
		option.Num(&o.Idle, "Idle", "idle", 5*time.Second, option.Above(0), "with --fairness: how long singles are sent to the idle server per round"),
	}
}

// fairnessResult is what one fairness run saw.
type fairnessResult struct {
	idle, during []time.Duration // single-query latencies, idle and during the POST
	alone, with  []time.Duration // the POST's time without and with the singles, one per round
	// The server's CPU time (ServerPID) during each POST without and with the singles, one per round.
	aloneCPU, withCPU []time.Duration
	errors            map[string]int // failed single queries by kind
}

// fairness runs opt.Rounds rounds against l.URL and writes the report to w. Without InPost the
// POST's texts are the first Post queries (cycling) and singles cycle through the ones after
// them (through all of them when there are no more), so they do not repeat a text of the POST;
// with InPost see FairnessOptions.
func (l *RetrieveOptions) fairness(w io.Writer, queries []string) error {
	f := l.Fairness
	posts := 2 * f.Rounds
	if f.InPost && len(queries) <= posts*f.Post {
		return fmt.Errorf("--singles-in-post needs more than %d queries (%d POSTs of %d new texts, and texts for the idle singles), the file has %d", posts*f.Post, posts, f.Post, len(queries))
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
	idle, during := &texts{all: queries}, &texts{all: queries}
	if len(queries) > f.Post {
		idle.all, during.all = queries[f.Post:], queries[f.Post:]
	}
	if f.InPost {
		idle.all = queries[posts*f.Post:]
	}
	res := &fairnessResult{errors: map[string]int{}}
	s := &singles{l: l, client: client, url: url, res: res}
	for round := range f.Rounds {
		res.idle = append(res.idle, s.send(nil, f.Idle, idle)...)
		for i := range 2 {
			if f.InPost {
				post = queries[(2*round+i)*f.Post : (2*round+i+1)*f.Post]
				during = &texts{all: slices.Clone(post)}
				slices.Reverse(during.all)
			}
			withSingles := (i+round)%2 == 1 // rounds alternate which goes first
			cpu0, err := serverCPU(l.ServerPID)
			if err != nil {
				return err
			}
			took, lat, err := s.postDuring(post, withSingles, during)
			if err != nil {
				return err
			}
			cpu1, err := serverCPU(l.ServerPID)
			if err != nil {
				return err
			}
			if withSingles {
				res.with, res.during = append(res.with, took), append(res.during, lat...)
				res.withCPU = append(res.withCPU, cpu1-cpu0)
			} else {
				res.alone = append(res.alone, took)
				res.aloneCPU = append(res.aloneCPU, cpu1-cpu0)
			}
		}
	}
	res.print(w, l)
	return nil
}

// texts are the texts singles ask, in turn (cycling); next is the next one's index. Guarded by
// the sending singles' mutex.
type texts struct {
	all  []string
	next int
}

// singles sends single-query requests and records their latencies.
type singles struct {
	l      *RetrieveOptions
	client *fasthttp.Client
	url    string
	res    *fairnessResult
	mu     sync.Mutex // guards res.errors
}

// send sends singles asking texts in turn (cycling), until stop is closed or d has passed (d =
// 0: only stop ends it), and returns the latencies of those answered. With Workers, each
// worker sends its next single once its last is answered; else one is sent every 1/Rate
// seconds, each on its own without waiting for the ones before (a blocked server does not
// slow the sending).
func (s *singles) send(stop <-chan struct{}, d time.Duration, t *texts) []time.Duration {
	var end <-chan time.Time
	if d > 0 {
		end = time.After(d)
	}
	ended := make(chan struct{})
	go func() {
		select {
		case <-stop:
		case <-end:
		}
		close(ended)
	}()
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		lat []time.Duration
	)
	one := func() {
		mu.Lock()
		body := s.l.body([]string{t.all[t.next%len(t.all)]})
		t.next++
		mu.Unlock()
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
	}
	if w := s.l.Fairness.Workers; w > 0 {
		wg.Add(w)
		for range w {
			go func() {
				defer wg.Done()
				for {
					select {
					case <-ended:
						return
					default:
						one()
					}
				}
			}()
		}
	} else {
		tick := time.NewTicker(time.Duration(float64(time.Second) / s.l.Fairness.Rate))
		defer tick.Stop()
	sending:
		for {
			select {
			case <-ended:
				break sending
			case <-tick.C:
				wg.Add(1)
				go func() {
					defer wg.Done()
					one()
				}()
			}
		}
	}
	wg.Wait()
	return lat
}

// postDuring sends the POST, with singles asking texts until it is answered when
// withSingles; it returns the POST's time and the singles' latencies.
func (s *singles) postDuring(post []string, withSingles bool, t *texts) (time.Duration, []time.Duration, error) {
	stop := make(chan struct{})
	sent := make(chan []time.Duration, 1)
	if withSingles {
		go func() { sent <- s.send(stop, 0, t) }()
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
	f := l.Fairness
	slices.Sort(r.idle)
	slices.Sort(r.during)
	idle99, during99 := percentileMs(r.idle, .99), percentileMs(r.during, .99)
	alone, with := median(r.alone), median(r.with)
	sending := fmt.Sprintf("%g/s", f.Rate)
	if f.Workers > 0 {
		sending = fmt.Sprintf("from %d workers", f.Workers)
	}
	if f.InPost {
		sending += " asking the POST's texts"
	}
	fmt.Fprintf(w, "fairness: url %s  POST of %d queries  single queries %s  %d rounds  topk %d  return_scores %v\n",
		l.URL, f.Post, sending, f.Rounds, l.TopK, l.ReturnScores)
	fmt.Fprintf(w, "idle single queries: %d  p50 %.1f ms  p99 %.1f ms\n", len(r.idle), percentileMs(r.idle, .5), idle99)
	fmt.Fprintf(w, "single queries during the POST: %d  p50 %.1f ms  p99 %.1f ms  = %.2fx the idle p99\n",
		len(r.during), percentileMs(r.during, .5), during99, during99/idle99)
	fmt.Fprintf(w, "POST alone %s s (median %.2f)  with the singles %s s (median %.2f)  slowdown %+.1f%%  = %.2f of its idle speed\n",
		seconds(r.alone), alone.Seconds(), seconds(r.with), with.Seconds(), 100*(with.Seconds()/alone.Seconds()-1), alone.Seconds()/with.Seconds())
	ratios := make([]string, len(r.with))
	for i := range r.with {
		ratios[i] = fmt.Sprintf("%.2f", r.with[i].Seconds()/r.alone[i].Seconds())
	}
	fmt.Fprintf(w, "POST with the singles / alone, per round: %s\n", strings.Join(ratios, " "))
	if l.ServerPID > 0 {
		// The POST's work is the same with or without the singles: its CPU alone is what bulk work
		// took of the server's CPU while the singles ran beside it.
		shares := make([]string, len(r.withCPU))
		for i := range r.withCPU {
			shares[i] = fmt.Sprintf("%.2f", r.aloneCPU[i].Seconds()/r.withCPU[i].Seconds())
		}
		fmt.Fprintf(w, "server CPU: POST alone %s s  POST with the singles %s s  the POST's share of it (its CPU alone / all), per round: %s\n",
			seconds(r.aloneCPU), seconds(r.withCPU), strings.Join(shares, " "))
	}
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
