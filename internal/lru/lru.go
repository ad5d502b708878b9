// Package lru is a least-recently-used map bounded by bytes: each value is added with the
// bytes it holds (the caller counts them), and the least recently used values are evicted
// while the total is over the budget. It is the result cache of engine.Retriever.
package lru

import "sync"

// Stats are a Cache's counters since New; Bytes and MaxBytes are its current size and budget.
type Stats struct {
	Hits, Misses, Evictions uint64
	Entries                 int
	Bytes, MaxBytes         int64
}

// entry is one cached value and its place in the recency list (most recent after head).
type entry[K comparable, V any] struct {
	key        K
	val        V
	size       int64
	prev, next *entry[K, V]
}

// Cache maps K to V within a byte budget. Safe for concurrent use: every method holds one
// mutex for a map access and a few pointer moves, never while the caller computes a value.
type Cache[K comparable, V any] struct {
	mu    sync.Mutex
	items map[K]*entry[K, V]
	head  entry[K, V] // sentinel of the circular recency list: head.next is the most recent
	stats Stats
}

// New returns an empty cache holding at most maxBytes (> 0) of values.
func New[K comparable, V any](maxBytes int64) *Cache[K, V] {
	c := &Cache[K, V]{items: map[K]*entry[K, V]{}, stats: Stats{MaxBytes: maxBytes}}
	c.head.prev, c.head.next = &c.head, &c.head
	return c
}

// Get returns the value of key and marks it most recently used. The value is shared with
// the cache and every other caller: read it, never write into it.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[key]
	if !ok {
		c.stats.Misses++
		var zero V
		return zero, false
	}
	c.stats.Hits++
	c.unlink(e)
	c.pushFront(e)
	return e.val, true
}

// Add stores val under key as holding size bytes (the caller's count: key, value and the
// cache's own bookkeeping, see EntryOverhead), replacing an older value of key, and evicts
// the least recently used values while the total is over the budget. A value larger than
// the whole budget is not stored.
func (c *Cache[K, V]) Add(key K, val V, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.items[key]; ok {
		c.remove(old)
	}
	if size > c.stats.MaxBytes {
		return
	}
	e := &entry[K, V]{key: key, val: val, size: size}
	c.items[key] = e
	c.pushFront(e)
	c.stats.Bytes += size
	for c.stats.Bytes > c.stats.MaxBytes {
		c.remove(c.head.prev)
		c.stats.Evictions++
	}
}

// Stats returns the counters and the current size.
func (c *Cache[K, V]) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries = len(c.items)
	return s
}

// EntryOverhead is what one entry costs the cache beyond its key's and value's own bytes,
// for callers that count an entry's size: the entry struct (key, value, size, two
// pointers) and its map slot (key, pointer, control byte, at Go maps' 7/8 load), rounded up
// to the allocator's size classes. TestEntryOverheadIsHonest measures it.
const EntryOverhead = 160

func (c *Cache[K, V]) pushFront(e *entry[K, V]) {
	e.prev, e.next = &c.head, c.head.next
	c.head.next.prev = e
	c.head.next = e
}

func (c *Cache[K, V]) unlink(e *entry[K, V]) {
	e.prev.next, e.next.prev = e.next, e.prev
}

func (c *Cache[K, V]) remove(e *entry[K, V]) {
	c.unlink(e)
	delete(c.items, e.key)
	c.stats.Bytes -= e.size
}
