package bm25

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/binary"
	"fmt"
)

// Search writes the k best rows of each query into labels[q*k:] and their BM25 scores into
// dist[q*k:], best first, as pyserini's LuceneSearcher.search ranks them: Lucene's
// BM25Similarity (k1, b of the index) over a bag of words, a term repeated in the query
// weighing its count, float32 term scores summed in float64, ties broken by the corpus id
// (as a string); scores are rounded to 4 decimals as pyserini returns them. A query with no term after analysis (empty, stop words only) and rows past
// the last hit get label -1. Safe for concurrent callers; it stops between queries when ctx
// ends.
func (x *Index) Search(ctx context.Context, queries []string, k int, dist []float32, labels []int64) error {
	if len(dist) < len(queries)*k || len(labels) < len(queries)*k {
		return fmt.Errorf("bm25: result buffers hold %d, %d of %d", len(dist), len(labels), len(queries)*k)
	}
	var s searcher
	for q, text := range queries {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.search(x, text, k, dist[q*k:(q+1)*k], labels[q*k:(q+1)*k])
	}
	return nil
}

// cursor walks one query term's postings.
type cursor struct {
	post   []byte
	doc    int64
	freq   uint64
	weight float32 // boost * idf
}

// advance moves to the next posting; doc is -1 past the last.
func (c *cursor) advance() {
	if len(c.post) == 0 {
		c.doc = -1
		return
	}
	d, n := binary.Uvarint(c.post)
	f, m := binary.Uvarint(c.post[n:])
	c.post = c.post[n+m:]
	c.doc += int64(d)
	c.freq = f
}

// searcher is one Search call's scratch.
type searcher struct {
	a       Analyzer
	terms   [][]byte
	counts  map[string]int
	cursors cursorHeap
	top     topHeap
}

func (s *searcher) search(x *Index, text string, k int, dist []float32, labels []int64) {
	for i := range labels {
		labels[i], dist[i] = -1, 0
	}
	if k <= 0 {
		return
	}
	if s.counts == nil {
		s.counts = map[string]int{}
	}
	clear(s.counts)
	s.terms = s.terms[:0]
	s.a.Terms(text, func(t []byte) {
		if n, ok := s.counts[string(t)]; ok {
			s.counts[string(t)] = n + 1
		} else if len(s.terms) < maxClauses {
			s.counts[string(t)] = 1
			s.terms = append(s.terms, bytes.Clone(t))
		}
	})
	s.cursors = s.cursors[:0]
	for _, t := range s.terms {
		df, post := x.lookup(t)
		if df == 0 {
			continue
		}
		c := &cursor{post: post, doc: -1, weight: float32(s.counts[string(t)]) * x.idf(df)}
		c.advance()
		s.cursors = append(s.cursors, c)
	}
	heap.Init(&s.cursors)
	s.top = topHeap{x: x, hits: s.top.hits[:0]}
	for len(s.cursors) > 0 {
		doc := s.cursors[0].doc
		var sum float64
		for len(s.cursors) > 0 && s.cursors[0].doc == doc {
			c := s.cursors[0]
			sum += float64(x.termScore(c.weight, c.freq, doc))
			c.advance()
			if c.doc < 0 {
				heap.Pop(&s.cursors)
			} else {
				heap.Fix(&s.cursors, 0)
			}
		}
		s.top.offer(hit{doc, float32(sum)}, k)
	}
	for i := len(s.top.hits) - 1; i >= 0; i-- {
		h := heap.Pop(&s.top).(hit)
		labels[i], dist[i] = h.row, h.score
	}
	n := 0
	for n < len(labels) && labels[n] >= 0 {
		n++
	}
	adjustTies(dist[:n])
}

// termScore is BM25Scorer.score of Lucene 9: weight - weight / (1 + freq * normInverse),
// each operation rounded to float32 (the conversions keep Go from fusing them).
func (x *Index) termScore(weight float32, freq uint64, doc int64) float32 {
	ni := x.normInverse[x.norms[doc]]
	return weight - float32(weight/float32(1+float32(float32(freq)*ni)))
}

// cursorHeap orders cursors by their current doc.
type cursorHeap []*cursor

func (h cursorHeap) Len() int           { return len(h) }
func (h cursorHeap) Less(i, j int) bool { return h[i].doc < h[j].doc }
func (h cursorHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(v any)        { *h = append(*h, v.(*cursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

type hit struct {
	row   int64
	score float32
}

// topHeap keeps the k best hits with the worst at the root.
type topHeap struct {
	x    *Index
	hits []hit
}

// better reports whether a ranks before b: higher score, then the smaller corpus id.
func (h *topHeap) better(a, b hit) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return bytes.Compare(h.x.id(a.row), h.x.id(b.row)) < 0
}

func (h *topHeap) offer(v hit, k int) {
	if len(h.hits) < k {
		heap.Push(h, v)
	} else if h.better(v, h.hits[0]) {
		h.hits[0] = v
		heap.Fix(h, 0)
	}
}

func (h *topHeap) Len() int           { return len(h.hits) }
func (h *topHeap) Less(i, j int) bool { return h.better(h.hits[j], h.hits[i]) }
func (h *topHeap) Swap(i, j int)      { h.hits[i], h.hits[j] = h.hits[j], h.hits[i] }
func (h *topHeap) Push(v any)         { h.hits = append(h.hits, v.(hit)) }
func (h *topHeap) Pop() any {
	v := h.hits[len(h.hits)-1]
	h.hits = h.hits[:len(h.hits)-1]
	return v
}
