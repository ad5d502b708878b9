package engine

import (
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"needle/internal/lru"
)

// cacheKey is what an answer depends on; the query prefix is the Retriever's own.
type cacheKey struct {
	text string
	k    int
}

// CacheStats are the result cache's counters (all zero without a cache). Coalesced counts
// the misses that waited for an identical query's search already in flight.
type CacheStats struct {
	lru.Stats
	Coalesced uint64
}

// resultCache is the Retriever's result cache: answers by (text, k) within a byte budget,
// and the searches in flight, which identical queries of other calls wait for instead of
// searching again (in GRPO the rollouts of a prompt ask the same query at nearly the same
// time). A nil *resultCache is no cache: every query is searched by its own call. Safe for
// concurrent use.
type resultCache struct {
	answers   *lru.Cache[cacheKey, []Hit]
	mu        sync.Mutex
	inflight  map[cacheKey]*flight // searches started and not finished
	coalesced atomic.Uint64
}

// flight is the search answering one key. The call that leads it sets hits or err and then
// closes done (nil for a flight no other call can see: without a cache).
type flight struct {
	key  cacheKey
	done chan struct{}
	hits []Hit
	err  error
}

// hitBytes is what one cached Hit holds: the slice element (the row is a view into the
// corpus mapping, which the Retriever maps anyway).
const hitBytes = int64(unsafe.Sizeof(Hit{}))

func newResultCache(maxBytes int64) *resultCache {
	if maxBytes <= 0 {
		return nil
	}
	return &resultCache{answers: lru.New[cacheKey, []Hit](maxBytes), inflight: map[cacheKey]*flight{}}
}

// lookup returns the cached hits of key (f == nil), or the flight that will answer it: lead
// is true when the caller must search key and then call finish(f), false when another call
// leads it and the caller waits for f.done.
func (c *resultCache) lookup(key cacheKey) (hits []Hit, f *flight, lead bool) {
	if c == nil {
		return nil, &flight{key: key}, true
	}
	if hits, ok := c.answers.Get(key); ok {
		return hits, nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.inflight[key]; ok {
		c.coalesced.Add(1)
		return nil, f, false
	}
	f = &flight{key: key, done: make(chan struct{})}
	c.inflight[key] = f
	return nil, f, true
}

// finish publishes the answer of a flight the caller leads: into the cache when it
// succeeded, then to the calls waiting for it.
func (c *resultCache) finish(f *flight, hits []Hit, err error) {
	f.hits, f.err = hits, err
	if c == nil {
		return
	}
	if err == nil {
		// A copy of its own, so an entry does not keep the whole request's hits alive.
		h := slices.Clone(hits)
		c.answers.Add(f.key, h, int64(len(f.key.text))+int64(cap(h))*hitBytes+lru.EntryOverhead)
	}
	c.mu.Lock()
	delete(c.inflight, f.key)
	c.mu.Unlock()
	close(f.done)
}

func (c *resultCache) stats() CacheStats {
	if c == nil {
		return CacheStats{}
	}
	return CacheStats{Stats: c.answers.Stats(), Coalesced: c.coalesced.Load()}
}
