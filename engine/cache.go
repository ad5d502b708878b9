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
// the misses that waited for an identical query's search already in flight; Lifted counts the
// interactive misses that searched a text themselves instead of waiting for a bulk request's
// search of it (see resultCache.lookup).
type CacheStats struct {
	lru.Stats
	Coalesced uint64
	Lifted    uint64
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
	lifted    atomic.Uint64
}

// flight is the search answering one key. The first of its leaders to succeed (or the last
// to fail) sets hits or err and then closes done (nil for a flight no other call can see:
// without a cache). bulk, leaders and published are guarded by resultCache.mu.
type flight struct {
	key  cacheKey
	done chan struct{}
	hits []Hit
	err  error

	bulk      bool // every leader's search runs in the Batcher's bulk lane
	leaders   int  // calls searching key that have not finished
	published bool
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
// leads it and the caller waits for f.done. bulk says that the caller's search runs in the
// Batcher's bulk lane. A caller whose search is interactive never waits for a flight led
// only by bulk searches: the bulk lane gives way to interactive work, so that wait can last
// a whole 2,560-query request. It leads the flight too (the flight is lifted): its own search
// runs in the interactive lane, and the first answer serves every waiter (the encoder is batch
// invariant, so both answers are the same bits).
func (c *resultCache) lookup(key cacheKey, bulk bool) (hits []Hit, f *flight, lead bool) {
	if c == nil {
		return nil, &flight{key: key}, true
	}
	if hits, ok := c.answers.Get(key); ok {
		return hits, nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.inflight[key]; ok {
		if f.bulk && !bulk && !f.published {
			f.bulk = false
			f.leaders++
			c.lifted.Add(1)
			return nil, f, true
		}
		c.coalesced.Add(1)
		return nil, f, false
	}
	f = &flight{key: key, done: make(chan struct{}), bulk: bulk, leaders: 1}
	c.inflight[key] = f
	return nil, f, true
}

// finish ends the caller's lead of f: the first success is published into the cache and to
// the calls waiting for f; a failure only once no other leader is left.
func (c *resultCache) finish(f *flight, hits []Hit, err error) {
	if c == nil {
		f.hits, f.err = hits, err
		return
	}
	c.mu.Lock()
	f.leaders--
	if f.published || (err != nil && f.leaders > 0) {
		c.mu.Unlock()
		return
	}
	f.published = true
	c.mu.Unlock()
	f.hits, f.err = hits, err
	if err == nil {
		// A copy of its own, so an entry does not keep the whole request's hits alive.
		h := slices.Clone(hits)
		c.answers.Add(f.key, h, int64(len(f.key.text))+int64(cap(h))*hitBytes+lru.EntryOverhead)
	}
	c.mu.Lock()
	delete(c.inflight, f.key) // after the cache holds the answer: a lookup finds one or the other
	c.mu.Unlock()
	close(f.done)
}

func (c *resultCache) stats() CacheStats {
	if c == nil {
		return CacheStats{}
	}
	return CacheStats{Stats: c.answers.Stats(), Coalesced: c.coalesced.Load(), Lifted: c.lifted.Load()}
}
