// Package server is the HTTP front of `needle serve`: the /retrieve and /access contract of
// the training stacks' retrieval server (see ANCHORS.md §1), health, readiness and
// Prometheus metrics, request limits and bearer auth, on fasthttp. A /retrieve request is
// parsed and checked here, answered by the engine (engine.Retriever.Retrieve: batcher ->
// encoder -> index -> docstore, with the request's context) and written as JSON here.
package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"needle/engine"
	"needle/internal/option"
	"needle/server/ui"
)

// Config holds the server's defaults and limits; its Specs give their defaults
// (option.Defaults) and New refuses what they do not take.
type Config struct {
	DefaultTopK  int           // topk when a request has none, null or 0
	MaxTopK      int           // larger topk values are capped to this and to the index size
	MaxQueries   int           // most queries (or URLs) in one request
	MaxBodyBytes int           // larger bodies get 413
	MaxHits      int           // most queries x topk in one request, bounding response memory
	MaxConns     int           // most open connections
	ReadTimeout  time.Duration // to read one request
	WriteTimeout time.Duration // to write one response
	IdleTimeout  time.Duration // keep-alive wait for the next request
	AuthToken    string        // if set, /retrieve, /access and /metrics need "Authorization: Bearer <token>"
	// LoadWait is how long a /retrieve or /access that arrives before SetRetriever waits for
	// it (then 503 + Retry-After); 0 answers 503 at once. See awaitReady.
	LoadWait time.Duration
	// Info names what is served, for /metrics (needle_info) and so for the search page.
	Info Info
}

// Specs declares the options (`needle serve`'s flags of them).
func (c *Config) Specs() option.Specs {
	return option.Specs{
		option.Num(&c.DefaultTopK, "DefaultTopK", "topk", 3, option.Above(0), "results per query when a request has no topk (or null or 0)"),
		option.Num(&c.MaxQueries, "MaxQueries", "max-queries", 8192, option.Above(0), "most queries (or URLs) in one request; more get 422"),
		option.Num(&c.MaxTopK, "MaxTopK", "max-topk", 1000, option.Above(0), "topk above this (or above the index size) is capped"),
		option.Num(&c.MaxHits, "MaxHits", "max-hits", 1<<18, option.Above(0), "most queries x topk in one request (bounds the response's memory); more get 422"),
		option.Num(&c.MaxBodyBytes, "MaxBodyBytes", "max-body", 32<<20, option.Above(0), "largest request body in bytes; larger get 413"),
		option.Num(&c.MaxConns, "MaxConns", "max-conns", 4096, option.Above(0), "most open client connections"),
		option.Num(&c.ReadTimeout, "ReadTimeout", "read-timeout", 60*time.Second, option.Above(0), "time to read one request"),
		option.Num(&c.WriteTimeout, "WriteTimeout", "write-timeout", 60*time.Second, option.Above(0), "time to write one response"),
		option.Num(&c.IdleTimeout, "IdleTimeout", "idle-timeout", 120*time.Second, option.Above(0), "keep-alive wait for a connection's next request"),
		option.String(&c.AuthToken, "AuthToken", "auth-token", "", "if set, /retrieve, /access and /metrics need \"Authorization: Bearer <token>\" (default $NEEDLE_AUTH_TOKEN)"),
		option.Num(&c.LoadWait, "LoadWait", "load-wait", 10*time.Minute, option.From(0), "how long a /retrieve or /access that arrives while the index loads waits for it (clients without retries, e.g. Search-R1's, get their answer late instead of a 503); past it 503 + Retry-After; 0 answers 503 at once"),
	}
}

// Info names what the server serves; cmd/needle fills it from the resolved engine options.
// Empty fields are written as "".
type Info struct {
	Index     string // the index file (or Milvus collection) served
	Model     string // the query encoder's model folder
	Precision string // the query encoder's Linear precision (fp16, int8, bf16)
}

// Server answers HTTP requests; it is alive (/health) from New and ready (/ready,
// /retrieve, /access) once SetRetriever was called. Safe for concurrent use.
type Server struct {
	cfg       Config
	auth      []byte // the expected Authorization header ("Bearer <token>"), nil without a token
	retriever atomic.Pointer[engine.Retriever]
	ready     chan struct{} // closed by SetRetriever: requests held while loading go on
	stopping  chan struct{} // closed by Shutdown: held requests get their 503
	readyOnce sync.Once
	stopOnce  sync.Once
	changed   atomic.Bool // a served file changed under the server (storeFailed): not ready
	metrics   *metrics
	http      *fasthttp.Server
	bodies    sync.Pool // *[]byte response buffers, owned by one handler at a time
}

// New returns a server with cfg's limits; it serves nothing until Serve. A limit out of range
// is an *option.Error.
func New(cfg Config) (*Server, error) {
	if err := cfg.Specs().Check(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, metrics: newMetrics(), ready: make(chan struct{}), stopping: make(chan struct{})}
	if s.cfg.AuthToken != "" {
		s.auth = []byte("Bearer " + s.cfg.AuthToken)
	}
	s.http = &fasthttp.Server{
		Handler:              s.Handler,
		ErrorHandler:         s.transportError,
		Name:                 "needle",
		Concurrency:          s.cfg.MaxConns + 2*connReserve, // never reached: see limits.go
		MaxRequestBodySize:   s.cfg.MaxBodyBytes,
		ReadTimeout:          s.cfg.ReadTimeout,
		WriteTimeout:         s.cfg.WriteTimeout,
		IdleTimeout:          s.cfg.IdleTimeout,
		CloseOnShutdown:      true,
		NoDefaultContentType: true,
	}
	return s, nil
}

// SetRetriever makes the server ready; r must stay usable until Shutdown returned.
func (s *Server) SetRetriever(r *engine.Retriever) {
	s.retriever.Store(r)
	s.readyOnce.Do(func() { close(s.ready) })
}

// ObserveBatch records the query count of one encoder batch (engine.BatcherOptions.OnBatch).
func (s *Server) ObserveBatch(queries int) { s.metrics.batch.Observe(float64(queries)) }

// Serve answers requests on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	return s.http.Serve(&limitListener{Listener: ln, s: s})
}

// Shutdown stops accepting connections and waits, until ctx ends, for in-flight requests
// (those held while loading are answered 503 at once).
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stopping) })
	return s.http.ShutdownWithContext(ctx)
}

// Handler routes one request and records its metrics.
func (s *Server) Handler(ctx *fasthttp.RequestCtx) {
	if s.refuseOverLimit(ctx) {
		return
	}
	start := time.Now()
	ep := s.route(ctx)
	s.metrics.observeRequest(ep, ctx.Response.StatusCode(), time.Since(start).Seconds())
}

func (s *Server) route(ctx *fasthttp.RequestCtx) endpoint {
	path := string(ctx.Path())
	ep, post := epOther, false
	switch path {
	case "/retrieve":
		ep, post = epRetrieve, true
	case "/access":
		ep, post = epAccess, true
	case "/rerank":
		ep, post = epRerank, true
	case "/health":
		ep = epHealth
	case "/ready":
		ep = epReady
	case "/metrics":
		ep = epMetrics
	case "/":
		ep = epPage
	default:
		writeDetail(ctx, fasthttp.StatusNotFound, "Not Found")
		return ep
	}
	if method := string(ctx.Method()); (post && method != "POST") || (!post && method != "GET" && method != "HEAD") {
		writeDetail(ctx, fasthttp.StatusMethodNotAllowed, "Method Not Allowed")
		return ep
	}
	if (ep == epRetrieve || ep == epAccess || ep == epRerank || ep == epMetrics) && !s.authorized(ctx) {
		ctx.Response.Header.Set("WWW-Authenticate", "Bearer")
		writeDetail(ctx, fasthttp.StatusUnauthorized, "Not authenticated")
		return ep
	}
	r, gone := s.retriever.Load(), false
	if r == nil && (ep == epRetrieve || ep == epAccess || ep == epRerank) {
		r, gone = s.awaitReady(ctx)
	}
	switch ep {
	case epPage:
		// The page holds no data: it reads /metrics and /retrieve with the token it asks for.
		ui.Write(ctx)
	case epHealth:
		writeJSON(ctx, fasthttp.StatusOK, []byte(`{"status":"ok"}`))
	case epReady:
		if r == nil {
			writeJSON(ctx, fasthttp.StatusServiceUnavailable, []byte(`{"status":"loading"}`))
		} else if s.changed.Load() {
			writeJSON(ctx, fasthttp.StatusServiceUnavailable, []byte(`{"status":"a served file changed"}`))
		} else if r.IndexErr() != nil {
			writeJSON(ctx, fasthttp.StatusServiceUnavailable, []byte(`{"status":"the index's device failed"}`))
		} else if err := r.Ready(ctx); err != nil {
			status, _ := json.Marshal(map[string]string{"status": err.Error()})
			writeJSON(ctx, fasthttp.StatusServiceUnavailable, status)
		} else {
			writeJSON(ctx, fasthttp.StatusOK, []byte(`{"status":"ready"}`))
		}
	case epMetrics:
		g := gauges{info: s.cfg.Info}
		if r != nil {
			g = gauges{info: s.cfg.Info, ready: !s.changed.Load() && r.IndexErr() == nil && r.Ready(ctx) == nil, queueQueries: r.Queued(), indexVectors: r.Ntotal(),
				indexBackend: r.IndexBackend(), badRows: r.BadRowsSkipped(), cache: r.CacheStats()}
			g.droppedQueries, g.bulkPauses, g.index = r.DroppedQueries(), r.BulkPauses(), r.IndexTelemetry()
			g.pages = r.HasPages()
		}
		ctx.SetContentType("text/plain; version=0.0.4; charset=utf-8")
		s.metrics.write(ctx, g)
	default:
		if gone {
			ctx.SetConnectionClose()
			writeDetail(ctx, statusClientClosed, errClientGone.Error())
		} else if r == nil {
			ctx.Response.Header.Set("Retry-After", "5")
			writeDetail(ctx, fasthttp.StatusServiceUnavailable, "not ready: the index, model and corpus are still loading")
		} else if ep == epRetrieve && r.HasReranker() {
			s.retrieveRerank(ctx, r)
		} else if ep == epRetrieve {
			s.retrieve(ctx, r)
		} else if ep == epRerank && r.HasReranker() {
			s.rerank(ctx, r)
		} else if ep == epRerank {
			writeDetail(ctx, fasthttp.StatusNotFound, engine.ErrNoReranker.Error()+": start needle serve with --rerank-model DIR to use /rerank")
		} else {
			s.access(ctx, r)
		}
	}
	return ep
}

// awaitReady holds a /retrieve or /access that came while the index loads until the server
// is ready, up to Config.LoadWait. A client without retries (Search-R1's requests.post per
// turn) then gets its answer late instead of a 503 it would crash on; clients with a timeout
// (verl 30 s, ASearcher 120 s) retry a held request as they retry a 503, and their client-side
// budget grows from their sleeps between attempts to their timeouts. It returns nil (the
// caller answers 503 + Retry-After) past LoadWait or once Shutdown began, and gone when the
// client closed its connection while held.
func (s *Server) awaitReady(ctx *fasthttp.RequestCtx) (r *engine.Retriever, gone bool) {
	if s.cfg.LoadWait == 0 {
		return nil, false
	}
	watched, stop := s.watchDisconnect(ctx)
	defer stop()
	s.metrics.held.Add(1)
	defer s.metrics.held.Add(-1)
	wait := time.NewTimer(s.cfg.LoadWait)
	defer wait.Stop()
	select {
	case <-s.ready:
	case <-watched.Done():
		return nil, true
	case <-wait.C:
	case <-s.stopping:
	}
	return s.retriever.Load(), false
}

func (s *Server) authorized(ctx *fasthttp.RequestCtx) bool {
	if s.auth == nil {
		return true
	}
	return subtle.ConstantTimeCompare(ctx.Request.Header.Peek("Authorization"), s.auth) == 1
}

// retrieve answers POST /retrieve: one inner list per query, best first; with
// return_scores each hit is {"document": <row>, "score": s}, else the row itself.
func (s *Server) retrieve(ctx *fasthttp.RequestCtx, r *engine.Retriever) {
	start := time.Now()
	req, err := parseRetrieve(ctx.Request.Header.ContentType(), ctx.PostBody(), s.cfg.MaxQueries)
	if err != nil {
		writeValidation(ctx, err)
		return
	}
	k := req.TopK
	if k == 0 {
		k = s.cfg.DefaultTopK
	}
	k = int(min(int64(k), int64(s.cfg.MaxTopK), r.Ntotal()))
	n := len(req.Queries)
	if n*k > s.cfg.MaxHits {
		writeValidation(ctx, invalid("value_error", fmt.Sprintf("Value error, %d queries x topk %d = %d hits exceeds this server's limit of %d per request",
			n, k, n*k, s.cfg.MaxHits), json.RawMessage(strconv.Itoa(req.TopK)), nil, "topk"))
		return
	}
	// The request's context goes down to the batcher and ends when the client goes away.
	watched, stop := s.watchDisconnect(ctx)
	parsed := time.Now()
	hits, err := r.Retrieve(watched, req.Queries, k)
	answered := time.Now()
	stop()
	switch {
	case errors.Is(context.Cause(watched), errClientGone):
		// Nobody reads this answer; 499 (nginx's "client closed request") counts it.
		ctx.SetConnectionClose()
		writeDetail(ctx, statusClientClosed, errClientGone.Error())
		return
	case errors.Is(err, engine.ErrBusy):
		ctx.Response.Header.Set("Retry-After", "1")
		writeDetail(ctx, fasthttp.StatusServiceUnavailable, err.Error())
		return
	case errors.Is(err, engine.ErrIndexLost): // /ready is false from now on (IndexErr)
		writeDetail(ctx, fasthttp.StatusServiceUnavailable, err.Error())
		return
	case engine.IsUnavailable(err): // the remote index (Milvus); /ready says when it is back
		ctx.Response.Header.Set("Retry-After", "5")
		writeDetail(ctx, fasthttp.StatusServiceUnavailable, err.Error())
		return
	case err != nil:
		s.storeFailed("corpus", err)
		writeDetail(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	// The rows are views into the corpus mapping: a fault while copying them (the file
	// truncated after the engine read the line) is an error wrapping engine.ErrChanged.
	body := s.getBody()
	if err := engine.CatchFault(func() { body = appendRetrieveResult(body, hits, req.ReturnScores) }); err != nil {
		s.putBody(body)
		s.storeFailed("corpus", err)
		writeDetail(ctx, fasthttp.StatusInternalServerError, "reading the corpus: "+err.Error())
		return
	}
	s.metrics.queries.Add(uint64(n))
	s.setBody(ctx, body)
	// Parsing and the answer's JSON ran outside the batcher's gate, beside bulk work: the
	// lanes' shares count them (docs/fair-batching.md).
	r.ChargeOutside(n, parsed.Sub(start)+time.Since(answered))
}

// statusClientClosed is the status /metrics counts for a request whose client closed its
// connection before the answer was ready.
const statusClientClosed = 499

// access answers POST /access: the page row of each URL, or null for a miss.
func (s *Server) access(ctx *fasthttp.RequestCtx, r *engine.Retriever) {
	if !r.HasPages() {
		writeDetail(ctx, fasthttp.StatusNotFound, "no pages file: start needle serve with --pages (alias --pages_path) to use /access")
		return
	}
	req, err := parseAccess(ctx.Request.Header.ContentType(), ctx.PostBody(), s.cfg.MaxQueries)
	if err != nil {
		writeValidation(ctx, err)
		return
	}
	body := s.getBody()
	rows, err := r.Access(req.URLs)
	if err == nil {
		err = engine.CatchFault(func() { body = appendAccessResult(body, rows) })
	}
	if err != nil {
		s.putBody(body)
		s.storeFailed("pages file", err)
		writeDetail(ctx, fasthttp.StatusInternalServerError, "reading the pages file: "+err.Error())
		return
	}
	s.setBody(ctx, body)
}

// storeFailed takes the server out of /ready, with one log line, when err says a served
// file (what: the corpus or the pages file) changed under its mapping.
func (s *Server) storeFailed(what string, err error) {
	if errors.Is(err, engine.ErrChanged) && s.changed.CompareAndSwap(false, true) {
		log.Printf("needle serve: the %s changed under the server, /ready is now false; restart once it is complete: %v", what, err)
	}
}

func (s *Server) getBody() []byte {
	if b, ok := s.bodies.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, 64<<10)
}

// putBody returns a body that was not sent to the pool.
func (s *Server) putBody(b []byte) { s.bodies.Put(&b) }

// setBody hands body to the response without copying and takes the response's previous
// buffer back into the pool.
func (s *Server) setBody(ctx *fasthttp.RequestCtx, body []byte) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	old := ctx.Response.SwapBody(body)
	s.bodies.Put(&old)
}

// transportError answers requests fasthttp could not read (too large, malformed HTTP,
// timeouts) with a JSON body like every other error, and counts them.
func (s *Server) transportError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		s.metrics.refused[refusedBodyTooLarge].Add(1)
		writeDetail(ctx, fasthttp.StatusRequestEntityTooLarge, "request body is larger than the server's limit")
	case errors.As(err, &small):
		s.metrics.refused[refusedHeaderTooLarge].Add(1)
		writeDetail(ctx, fasthttp.StatusRequestHeaderFieldsTooLarge, "request headers are larger than the server's limit")
	case errors.As(err, &netErr) && netErr.Timeout():
		s.metrics.refused[refusedReadTimeout].Add(1)
		writeDetail(ctx, fasthttp.StatusRequestTimeout, "timed out reading the request")
	default:
		s.metrics.refused[refusedMalformed].Add(1)
		writeDetail(ctx, fasthttp.StatusBadRequest, "cannot read the HTTP request: "+err.Error())
	}
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// writeDetail writes FastAPI's HTTPException body {"detail": msg}.
func writeDetail(ctx *fasthttp.RequestCtx, status int, msg string) {
	body, _ := json.Marshal(struct {
		Detail string `json:"detail"`
	}{msg})
	writeJSON(ctx, status, body)
}

// writeValidation writes a 422 {"detail": [...]} for a validation error (400 for a body
// that is not text).
func writeValidation(ctx *fasthttp.RequestCtx, err error) {
	if errors.Is(err, errUnparsableBody) {
		writeDetail(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	var v *validationError
	if !errors.As(err, &v) {
		writeDetail(ctx, fasthttp.StatusUnprocessableEntity, err.Error())
		return
	}
	body, mErr := marshalJSON(struct {
		Detail []detail `json:"detail"`
	}{v.details})
	if mErr != nil {
		writeDetail(ctx, fasthttp.StatusUnprocessableEntity, v.Error())
		return
	}
	writeJSON(ctx, fasthttp.StatusUnprocessableEntity, body)
}
