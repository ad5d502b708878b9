package lru

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

func TestEvictsLeastRecentlyUsedByBytes(t *testing.T) {
	c := New[string, int](100)
	c.Add("a", 1, 40)
	c.Add("b", 2, 40)
	if v, ok := c.Get("a"); !ok || v != 1 { // a is now more recent than b
		t.Fatalf("Get(a) = %v, %v", v, ok)
	}
	c.Add("c", 3, 40) // 120 > 100: b goes
	if _, ok := c.Get("b"); ok {
		t.Error("b survived; it was the least recently used")
	}
	for k, want := range map[string]int{"a": 1, "c": 3} {
		if v, ok := c.Get(k); !ok || v != want {
			t.Errorf("Get(%s) = %v, %v; want %d", k, v, ok, want)
		}
	}
	c.Add("a", 10, 60) // replaces a: 60 + 40 = 100 fits
	if v, _ := c.Get("a"); v != 10 {
		t.Errorf("replaced a = %d, want 10", v)
	}
	c.Add("huge", 0, 101) // larger than the budget: not stored, nothing evicted
	s := c.Stats()
	want := Stats{Hits: 4, Misses: 1, Evictions: 1, Entries: 2, Bytes: 100, MaxBytes: 100}
	if s != want {
		t.Errorf("Stats = %+v, want %+v", s, want)
	}
	c.Add("d", 4, 100) // evicts both
	if s := c.Stats(); s.Entries != 1 || s.Bytes != 100 || s.Evictions != 3 {
		t.Errorf("after d: %+v", s)
	}
}

// Concurrent readers and writers keep the byte count and the entries consistent (run with -race).
func TestConcurrentUse(t *testing.T) {
	c := New[int, int](50 * 8)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				key := (i * (g + 1)) % 120
				if v, ok := c.Get(key); ok && v != key*key {
					t.Errorf("Get(%d) = %d", key, v)
					return
				}
				c.Add(key, key*key, 8)
			}
		}()
	}
	wg.Wait()
	s := c.Stats()
	if s.Bytes != int64(s.Entries)*8 || s.Bytes > s.MaxBytes || s.Hits+s.Misses != 8*2000 {
		t.Errorf("Stats = %+v", s)
	}
}

// The bytes a caller counts per entry (key and value bytes + EntryOverhead) are at least what
// the Go heap grows by per entry, for the engine's shape of entry: a text and k as the key,
// a small slice as the value.
func TestEntryOverheadIsHonest(t *testing.T) {
	type key struct {
		text string
		k    int
	}
	const n = 100000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := New[key, []byte](1 << 40)
	var counted int64
	for i := range n {
		text := fmt.Sprintf("query number %d of the test", i)
		val := make([]byte, 96)
		size := int64(len(text)+cap(val)) + EntryOverhead
		counted += size
		c.Add(key{text, 3}, val, size)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("counted %d bytes, heap grew by %d", counted, grown)
	if counted < grown || counted > 2*grown {
		t.Errorf("counted %d bytes for %d entries, the heap grew by %d", counted, n, grown)
	}
	runtime.KeepAlive(c)
}
