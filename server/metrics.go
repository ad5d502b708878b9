package server

import (
	"fmt"
	"io"
	"math"
	"sync/atomic"

	"needle/engine"
)

// endpoint indexes the per-endpoint metrics; names are the Prometheus label values.
type endpoint int

const (
	epRetrieve endpoint = iota
	epAccess
	epHealth
	epReady
	epMetrics
	epOther
	numEndpoints
)

var endpointNames = [numEndpoints]string{"retrieve", "access", "health", "ready", "metrics", "other"}

// histogram is a Prometheus histogram with fixed upper bounds; safe for concurrent use.
type histogram struct {
	bounds []float64
	counts []atomic.Uint64 // counts[i]: observations <= bounds[i]; last: +Inf (not cumulative)
	sum    atomic.Uint64   // float64 bits
}

func newHistogram(bounds ...float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// write prints h in the text exposition format with the given label set (may be "").
func (h *histogram) write(w io.Writer, name, labels string) {
	sep := ""
	if labels != "" {
		sep = ","
	}
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i].Load()
		fmt.Fprintf(w, "%s_bucket{%s%sle=\"%g\"} %d\n", name, labels, sep, b, cum)
	}
	cum += h.counts[len(h.bounds)].Load()
	fmt.Fprintf(w, "%s_bucket{%s%sle=\"+Inf\"} %d\n", name, labels, sep, cum)
	braces := ""
	if labels != "" {
		braces = "{" + labels + "}"
	}
	fmt.Fprintf(w, "%s_sum%s %g\n%s_count%s %d\n", name, braces, math.Float64frombits(h.sum.Load()), name, braces, cum)
}

// metrics are the server's Prometheus metrics, written by hand (no client library).
// All fields are safe for concurrent use.
type metrics struct {
	requests [numEndpoints][600]atomic.Uint64 // by endpoint and HTTP status
	latency  [numEndpoints]*histogram         // seconds
	batch    *histogram                       // queries per encoder batch
	queries  atomic.Uint64                    // queries answered by /retrieve
	refused  [numRefusals]atomic.Uint64       // requests and connections answered before any handler (limits.go)

	// disconnects counts /retrieve clients (and held ones) that closed their connection before the answer (disconnect.go).
	disconnects atomic.Uint64
	held        atomic.Int64 // requests waiting for the index to load (Server.awaitReady)
}

func newMetrics() *metrics {
	m := &metrics{batch: newHistogram(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)}
	for i := range m.latency {
		m.latency[i] = newHistogram(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60)
	}
	return m
}

func (m *metrics) observeRequest(ep endpoint, status int, seconds float64) {
	if status >= 0 && status < len(m.requests[ep]) {
		m.requests[ep][status].Add(1)
	}
	m.latency[ep].observe(seconds)
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
}

func (m *metrics) write(w io.Writer, g gauges) {
	fmt.Fprintf(w, "# HELP needle_requests_total HTTP requests by endpoint and status code.\n# TYPE needle_requests_total counter\n")
	for ep := range numEndpoints {
		for code := range m.requests[ep] {
			if n := m.requests[ep][code].Load(); n > 0 {
				fmt.Fprintf(w, "needle_requests_total{endpoint=%q,code=\"%d\"} %d\n", endpointNames[ep], code, n)
			}
		}
	}
	fmt.Fprintf(w, "# HELP needle_request_duration_seconds Time from request parsed to response ready.\n# TYPE needle_request_duration_seconds histogram\n")
	for ep := range numEndpoints {
		m.latency[ep].write(w, "needle_request_duration_seconds", fmt.Sprintf("endpoint=%q", endpointNames[ep]))
	}
	fmt.Fprintf(w, "# HELP needle_batch_queries Queries per encoder batch.\n# TYPE needle_batch_queries histogram\n")
	m.batch.write(w, "needle_batch_queries", "")
	fmt.Fprintf(w, "# HELP needle_queries_total Queries answered by /retrieve.\n# TYPE needle_queries_total counter\nneedle_queries_total %d\n", m.queries.Load())
	fmt.Fprintf(w, "# HELP needle_bad_rows_skipped_total Hits left out of answers because their corpus line is not a JSON object with a string contents.\n# TYPE needle_bad_rows_skipped_total counter\nneedle_bad_rows_skipped_total %d\n", g.badRows)
	fmt.Fprintf(w, "# HELP needle_client_disconnects_total /retrieve requests, and requests held while loading, whose client closed its connection before the answer was ready.\n# TYPE needle_client_disconnects_total counter\nneedle_client_disconnects_total %d\n", m.disconnects.Load())
	fmt.Fprintf(w, "# HELP needle_dropped_queries_total Queries not encoded, or whose batch was stopped part way, because their client closed its connection.\n# TYPE needle_dropped_queries_total counter\nneedle_dropped_queries_total %d\n", g.droppedQueries)
	fmt.Fprintf(w, "# HELP needle_bulk_pauses_total Times the work of a request of more than --max-batch queries paused so that smaller requests went first.\n# TYPE needle_bulk_pauses_total counter\nneedle_bulk_pauses_total %d\n", g.bulkPauses)
	fmt.Fprintf(w, "# HELP needle_refused_total Requests and connections refused before any handler ran, by reason.\n# TYPE needle_refused_total counter\n")
	for r := range numRefusals {
		fmt.Fprintf(w, "needle_refused_total{reason=%q} %d\n", refusalNames[r], m.refused[r].Load())
	}
	ready := 0
	if g.ready {
		ready = 1
	}
	fmt.Fprintf(w, "# HELP needle_ready 1 once index, model and corpus are loaded.\n# TYPE needle_ready gauge\nneedle_ready %d\n", ready)
	fmt.Fprintf(w, "# HELP needle_held_requests /retrieve and /access requests waiting for the index to load (--load-wait).\n# TYPE needle_held_requests gauge\nneedle_held_requests %d\n", m.held.Load())
	fmt.Fprintf(w, "# HELP needle_queue_queries Queries admitted and not yet answered.\n# TYPE needle_queue_queries gauge\nneedle_queue_queries %d\n", g.queueQueries)
	fmt.Fprintf(w, "# HELP needle_index_vectors Vectors in the served index.\n# TYPE needle_index_vectors gauge\nneedle_index_vectors %d\n", g.indexVectors)
	if g.indexBackend != "" {
		fmt.Fprintf(w, "# HELP needle_index_backend The index backend serving searches (label backend).\n# TYPE needle_index_backend gauge\nneedle_index_backend{backend=%q} 1\n", g.indexBackend)
	}
	writeCache(w, g.cache)
}

// writeCache writes the result cache's figures (all 0 with --cache-mb 0).
func writeCache(w io.Writer, c engine.CacheStats) {
	fmt.Fprintf(w, "# HELP needle_cache_hits_total Queries answered by the result cache.\n# TYPE needle_cache_hits_total counter\nneedle_cache_hits_total %d\n", c.Hits)
	fmt.Fprintf(w, "# HELP needle_cache_misses_total Queries looked up in the result cache and searched.\n# TYPE needle_cache_misses_total counter\nneedle_cache_misses_total %d\n", c.Misses)
	fmt.Fprintf(w, "# HELP needle_cache_coalesced_total Cache misses that waited for the search of an identical query already in flight.\n# TYPE needle_cache_coalesced_total counter\nneedle_cache_coalesced_total %d\n", c.Coalesced)
	fmt.Fprintf(w, "# HELP needle_cache_evictions_total Answers evicted from the result cache to stay within --cache-mb.\n# TYPE needle_cache_evictions_total counter\nneedle_cache_evictions_total %d\n", c.Evictions)
	fmt.Fprintf(w, "# HELP needle_cache_bytes Bytes held by the result cache.\n# TYPE needle_cache_bytes gauge\nneedle_cache_bytes %d\n", c.Bytes)
	fmt.Fprintf(w, "# HELP needle_cache_max_bytes The result cache's budget (--cache-mb).\n# TYPE needle_cache_max_bytes gauge\nneedle_cache_max_bytes %d\n", c.MaxBytes)
}
