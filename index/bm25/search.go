package bm25

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"needle/internal/gate"
)

// Search writes the k best rows of each query into labels[q*k:] and their BM25 scores into
// dist[q*k:], best first, as pyserini's LuceneSearcher.search ranks them: Lucene's
// BM25Similarity (k1, b of the index) over a bag of words, a term repeated in the query
// weighing its count, float32 term scores summed in float64, ties broken by the corpus id
// (as a string), then Anserini's tie adjustment (adjustTies). A query with no term after
// analysis (empty, stop words only) and rows past the last hit get label -1. The queries are
// shared among GOMAXPROCS workers; each query's answer is the same whoever runs it. Safe for
// concurrent callers; it stops between queries when ctx ends, and pauses there for
// interactive work when ctx carries a bulk unit of the serving gate (internal/gate).
func (x *Index) Search(ctx context.Context, queries []string, k int, dist []float32, labels []int64) error {
	if len(dist) < len(queries)*k || len(labels) < len(queries)*k {
		return fmt.Errorf("bm25: result buffers hold %d, %d of %d", len(dist), len(labels), len(queries)*k)
	}
	var next atomic.Int64
	var pause sync.Mutex // a gate unit pauses for one caller at a time; the others wait here
	work := func() error {
		var s searcher
		for q := int(next.Add(1) - 1); q < len(queries); q = int(next.Add(1) - 1) {
			pause.Lock()
			err := cmp.Or(gate.Wait(ctx), ctx.Err())
			pause.Unlock()
			if err != nil {
				return err
			}
			s.search(x, queries[q], k, dist[q*k:(q+1)*k], labels[q*k:(q+1)*k])
		}
		return nil
	}
	workers := min(runtime.GOMAXPROCS(0), len(queries))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = work()
		}()
	}
	if workers > 0 {
		errs[0] = work()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// searcher is one Search call's scratch.
type searcher struct {
	a       Analyzer
	terms   bag
	cursors []*cursor
	bounds  []float64 // bounds[i]: the sum of the score bounds of cursors[:i]
	window  []float64 // window[i]: the sum of the block bounds of cursors[:i] in topK's window
	top     topHeap
}

func (s *searcher) search(x *Index, text string, k int, dist []float32, labels []int64) {
	for i := range labels {
		labels[i], dist[i] = -1, 0
	}
	if k <= 0 {
		return
	}
	s.queryCursors(x, text)
	s.top = topHeap{x: x, hits: s.top.hits[:0]}
	s.topK(x, k)
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

// queryCursors analyzes text into a bag of words (a term repeated weighs its count, at most
// maxClauses distinct terms) and opens a cursor on each term of the index, sorted by score
// bound, lowest first.
func (s *searcher) queryCursors(x *Index, text string) {
	s.terms.reset()
	s.a.Terms(text, func(t []byte) { s.terms.add(t, maxClauses) })
	s.cursors = s.cursors[:0]
	for i := range s.terms.len() {
		df, post, blocks := x.lookup(s.terms.term(i))
		if df == 0 {
			continue
		}
		s.cursors = append(s.cursors, newCursor(post, blocks, float32(s.terms.counts[i])*x.idf(df), x))
	}
	slices.SortFunc(s.cursors, func(a, b *cursor) int { return cmp.Compare(a.maxScore, b.maxScore) })
	s.bounds = append(s.bounds[:0], 0)
	for _, c := range s.cursors {
		s.bounds = append(s.bounds, s.bounds[len(s.bounds)-1]+float64(c.maxScore))
	}
}

// topK offers to s.top every row that may enter the k best, by block-max MaxScore (as
// Lucene 9.7's MaxScoreBulkScorer does). Once k rows are held, the worst of them is a
// threshold. The rows are walked in windows, each up to the end of the first block of the
// terms whose bounds (on any row) are essential; in a window every term's bound is the
// largest of its block bounds there, scored once per window rather than once per row or
// block. Where the bounds of all terms together stay below the threshold, the window is
// skipped; otherwise the terms of lowest bounds whose window bounds together stay below it
// are not essential there (a row that has none of the others cannot enter), so rows are
// drawn from the essential terms only, and a row is dropped as soon as its score so far plus
// the window bounds of the terms not yet read stays below the threshold. A row whose score
// could equal the threshold is always scored (ties go by id), so the hits and scores are
// exactly those of scoring every row.
func (s *searcher) topK(x *Index, k int) {
	cs, essential := s.cursors, 0 // cs[:essential]: not essential on any row
	threshold := func() float32 {
		if len(s.top.hits) < k {
			return float32(math.Inf(-1)) // nothing is below it: every row is scored
		}
		return s.top.hits[0].score
	}
	s.window = slices.Grow(s.window[:0], len(cs)+1)[:len(cs)+1]
	s.window[0] = 0 // window[i]: the sum of the window bounds of cs[:i]
	for end := int64(-1); end != noMore; {
		// the window starts after the last one, and at the first row of an essential term
		first := int64(noMore)
		for _, c := range cs[essential:] {
			first = min(first, c.doc)
		}
		start := max(end+1, first)
		if start == noMore {
			return
		}
		for _, c := range cs[:essential] {
			c.windowStart(start)
		}
		end = noMore
		for _, c := range cs[essential:] {
			end = min(end, c.windowStart(start))
		}
		for i, c := range cs {
			s.window[i+1] = s.window[i] + float64(c.windowBound(end))
		}
		lead := essential // cs[:lead]: not essential in this window
		for lead < len(cs) && below(s.window[lead+1], threshold()) {
			lead++
		}
		for _, c := range cs[lead:] {
			c.advance(start) // rows before start, read in an earlier window, are not offered twice
		}
		for {
			d := int64(noMore)
			for _, c := range cs[lead:] {
				d = min(d, c.doc)
			}
			if d > end || d == noMore {
				break
			}
			var score float64
			for _, c := range cs[lead:] {
				if c.doc == d {
					score += float64(c.score(x, d))
					c.next()
				}
			}
			dropped := false
			for i := lead - 1; i >= 0; i-- {
				if below(score+s.window[i+1], threshold()) {
					dropped = true
					break
				}
				if c := cs[i]; c.advance(d) == d {
					score += float64(c.score(x, d))
				}
			}
			if dropped {
				continue
			}
			s.top.offer(hit{d, float32(score)}, k)
			for essential < len(cs) && below(s.bounds[essential+1], threshold()) {
				essential++
			}
			for lead < len(cs) && below(s.window[lead+1], threshold()) {
				lead++
			}
		}
	}
}

// below reports whether a score bound, summed in float64 (its rounding widened by far more
// than the rounding of up to maxClauses additions), stays below threshold once rounded to
// float32 as a score is.
func below(bound float64, threshold float32) bool {
	return float32(bound*(1+1e-12)) < threshold
}

// termScore is BM25Scorer.score of Lucene 9 for a posting of the given impact (impact()):
// weight - weight / (1 + freq * normInverse), each operation rounded to float32 (the
// conversions keep Go from fusing them). It grows with impact.
func termScore(weight, impact float32) float32 {
	return weight - float32(weight/float32(1+impact))
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
