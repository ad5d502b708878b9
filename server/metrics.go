package server

import (
	"fmt"
	"io"
	"sync/atomic"

	"needle/engine"
	"needle/internal/prom"
)

// endpoint indexes the per-endpoint metrics; names are the Prometheus label values.
type endpoint int

const (
	epRetrieve endpoint = iota
	epAccess
	epHealth
	epReady
	epMetrics
	epPage
	epRerank
	epOther
	numEndpoints
)

var endpointNames = [numEndpoints]string{"retrieve", "access", "health", "ready", "metrics", "page", "rerank", "other"}

// metrics are the server's Prometheus metrics (internal/prom writes them).
// All fields are safe for concurrent use.
type metrics struct {
	requests [numEndpoints][600]atomic.Uint64 // by endpoint and HTTP status
	latency  [numEndpoints]*prom.Histogram    // seconds
	batch    *prom.Histogram                  // queries per encoder batch
	queries  atomic.Uint64                    // queries answered by /retrieve
	refused  [numRefusals]atomic.Uint64       // requests and connections answered before any handler (limits.go)

	// disconnects counts /retrieve clients (and held ones) that closed their connection before the answer (disconnect.go).
	disconnects atomic.Uint64
	held        atomic.Int64 // requests waiting for the index to load (Server.awaitReady)
}

func newMetrics() *metrics {
	m := &metrics{batch: prom.NewHistogram(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)}
	for i := range m.latency {
		m.latency[i] = prom.NewHistogram(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60)
	}
	return m
}

func (m *metrics) observeRequest(ep endpoint, status int, seconds float64) {
	if status >= 0 && status < len(m.requests[ep]) {
		m.requests[ep][status].Add(1)
	}
	m.latency[ep].Observe(seconds)
}

// gauges are the engine's figures /metrics reports next to the server's own counters.
type gauges struct {
	ready        bool
	queueQueries int64
	indexVectors int64
	indexBackend string // engine.Retriever.IndexBackend
	badRows      uint64 // hits the engine left out because their corpus row is bad

	// droppedQueries counts queries the engine did not finish encoding (never started, or a batch
	// stopped between layers) because their clients went away.
	droppedQueries int64
	// bulkPauses counts the times a big request's work gave way to smaller requests' (fair batching).
	bulkPauses int64

	// cache is the engine's result cache counters.
	cache engine.CacheStats
	// index are the index's own figures (the GPU index: devices, memory, search time).
	index []prom.Metric
	info  Info // what is served (Config.Info)
	pages bool // the retriever has a pages file: /access answers
}

func (m *metrics) write(w io.Writer, g gauges) {
	p := prom.NewWriter(w)
	requests := prom.Metric{Name: "needle_requests_total", Type: "counter", Help: "HTTP requests by endpoint and status code."}
	latency := make([]prom.Labeled, numEndpoints)
	for ep := range numEndpoints {
		for code := range m.requests[ep] {
			if n := m.requests[ep][code].Load(); n > 0 {
				requests.Samples = append(requests.Samples, prom.Sample{Labels: fmt.Sprintf("endpoint=%q,code=\"%d\"", endpointNames[ep], code), Value: float64(n)})
			}
		}
		latency[ep] = prom.Labeled{Labels: fmt.Sprintf("endpoint=%q", endpointNames[ep]), H: m.latency[ep]}
	}
	p.Write(requests)
	p.Histograms("needle_request_duration_seconds", "Time from request parsed to response ready.", latency...)
	p.Histograms("needle_batch_queries", "Queries per encoder batch.", prom.Labeled{H: m.batch})
	refused := prom.Metric{Name: "needle_refused_total", Type: "counter", Help: "Requests and connections refused before any handler ran, by reason."}
	for r := range numRefusals {
		refused.Samples = append(refused.Samples, prom.Sample{Labels: fmt.Sprintf("reason=%q", refusalNames[r]), Value: float64(m.refused[r].Load())})
	}
	ready := 0.0
	if g.ready {
		ready = 1
	}
	p.Write(
		prom.Counter("needle_queries_total", "Queries answered by /retrieve.", float64(m.queries.Load())),
		prom.Counter("needle_bad_rows_skipped_total", "Hits left out of answers because their corpus line is not a JSON object with a string contents.", float64(g.badRows)),
		prom.Counter("needle_client_disconnects_total", "/retrieve requests, and requests held while loading, whose client closed its connection before the answer was ready.", float64(m.disconnects.Load())),
		prom.Counter("needle_dropped_queries_total", "Queries not encoded, or whose batch was stopped part way, because their client closed its connection.", float64(g.droppedQueries)),
		prom.Counter("needle_bulk_pauses_total", "Times the work of a request of more than --max-batch queries paused so that smaller requests went first.", float64(g.bulkPauses)),
		refused,
		prom.Gauge("needle_ready", "1 once index, model and corpus are loaded.", ready),
		prom.Gauge("needle_held_requests", "/retrieve and /access requests waiting for the index to load (--load-wait).", float64(m.held.Load())),
		prom.Gauge("needle_queue_queries", "Queries admitted and not yet answered.", float64(g.queueQueries)),
		prom.Gauge("needle_index_vectors", "Vectors in the served index.", float64(g.indexVectors)),
	)
	pages := "0"
	if g.pages {
		pages = "1"
	}
	p.Write(prom.Metric{Name: "needle_info", Type: "gauge", Help: "What is served: index, model, query precision, pages (1: /access answers); always 1. The search page at / reads it.",
		Samples: []prom.Sample{{Labels: prom.Label("index", g.info.Index) + "," + prom.Label("model", g.info.Model) + "," +
			prom.Label("precision", g.info.Precision) + "," + prom.Label("pages", pages), Value: 1}}})
	if g.indexBackend != "" {
		p.Write(prom.Metric{Name: "needle_index_backend", Type: "gauge", Help: "The index backend serving searches (label backend).",
			Samples: []prom.Sample{{Labels: fmt.Sprintf("backend=%q", g.indexBackend), Value: 1}}})
	}
	c := g.cache // all 0 with --cache-mb 0
	p.Write(
		prom.Counter("needle_cache_hits_total", "Queries answered by the result cache.", float64(c.Hits)),
		prom.Counter("needle_cache_misses_total", "Queries looked up in the result cache and searched.", float64(c.Misses)),
		prom.Counter("needle_cache_coalesced_total", "Cache misses that waited for the search of an identical query already in flight.", float64(c.Coalesced)),
		prom.Counter("needle_cache_lifted_total", "Single-query misses that searched their text themselves instead of waiting for a bulk request's search of it.", float64(c.Lifted)),
		prom.Counter("needle_cache_evictions_total", "Answers evicted from the result cache to stay within --cache-mb.", float64(c.Evictions)),
		prom.Gauge("needle_cache_bytes", "Bytes held by the result cache.", float64(c.Bytes)),
		prom.Gauge("needle_cache_max_bytes", "The result cache's budget (--cache-mb).", float64(c.MaxBytes)),
	)
	p.Write(g.index...)
}
