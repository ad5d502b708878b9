// Package enginetest holds small in-memory stand-ins for engine's Encoder, Index, DocStore
// and PageStore, for the unit tests of engine and server (and its lifecycle) only. The real parts (encoder/bert,
// faissgo, docstore) are exercised by their own tests and by e2e/.
package enginetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"needle/docstore"
	"needle/engine"
	"needle/internal/option"
)

// Batcher is o with the Batcher's defaults (engine.BatcherOptions.Specs) for the bounds it
// leaves zero: a test sets the bounds it is about.
func Batcher(o engine.BatcherOptions) engine.BatcherOptions {
	d := option.Defaults[engine.BatcherOptions]()
	o.MaxBatch = cmp.Or(o.MaxBatch, d.MaxBatch)
	o.MaxQueued = cmp.Or(o.MaxQueued, d.MaxQueued)
	o.Encoders = cmp.Or(o.Encoders, d.Encoders)
	return o
}

// Options is o with Batcher(o.Batcher): what engine.Open takes.
func Options(o engine.Options) engine.Options {
	o.Batcher = Batcher(o.Batcher)
	return o
}

// NewBatcher is engine.NewBatcher with Batcher(o); an error fails t.
func NewBatcher(t testing.TB, enc engine.Encoder, idx engine.Index, prefix string, o engine.BatcherOptions) *engine.Batcher {
	t.Helper()
	b, err := engine.NewBatcher(enc, idx, prefix, Batcher(o))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// HashEncoder maps each word of a text to one of Dimension buckets (FNV hash) and
// L2-normalizes the counts: texts sharing words get a high inner product. Batches counts
// the Encode calls and Texts the texts they encoded; Fail, when set, makes Encode return it.
type HashEncoder struct {
	Dimension int
	Batches   atomic.Int64
	Texts     atomic.Int64
	Fail      error
}

func (e *HashEncoder) Dim() int { return e.Dimension }

func (e *HashEncoder) Encode(texts []string, prefix string) ([]float32, error) {
	e.Batches.Add(1)
	e.Texts.Add(int64(len(texts)))
	if e.Fail != nil {
		return nil, e.Fail
	}
	out := make([]float32, len(texts)*e.Dimension)
	for i, t := range texts {
		v := out[i*e.Dimension : (i+1)*e.Dimension]
		for _, w := range strings.Fields(strings.ToLower(prefix + t)) {
			h := fnv.New32a()
			h.Write([]byte(w))
			v[int(h.Sum32())%e.Dimension]++
		}
		var norm float64
		for _, x := range v {
			norm += float64(x) * float64(x)
		}
		if norm == 0 {
			v[0], norm = 1, 1
		}
		for j := range v {
			v[j] /= float32(math.Sqrt(norm))
		}
	}
	return out, nil
}

// GatedEncoder signals each Encode call that Hold selects (every call when Hold is nil) on
// Started and holds it until Release is closed, so a test can act while a batch is being
// encoded.
type GatedEncoder struct {
	engine.Encoder
	Started chan struct{}
	Release chan struct{}
	Hold    func(texts []string) bool
}

func (e *GatedEncoder) Encode(texts []string, prefix string) ([]float32, error) {
	if e.Hold == nil || e.Hold(texts) {
		e.Started <- struct{}{}
		<-e.Release
	}
	return e.Encoder.Encode(texts, prefix)
}

// FlatIndex is an exact inner-product index over Vectors (Ntotal*Dimension floats).
type FlatIndex struct {
	Dimension int
	Vectors   []float32
}

func (x *FlatIndex) Dim() int      { return x.Dimension }
func (x *FlatIndex) Ntotal() int64 { return int64(len(x.Vectors) / x.Dimension) }

func (x *FlatIndex) Search(q []float32, k int, dist []float32, labels []int64) error {
	n := len(q) / x.Dimension
	if len(dist) < n*k || len(labels) < n*k {
		return errors.New("result buffers too small")
	}
	type hit struct {
		score float32
		row   int64
	}
	for i := range n {
		qi := q[i*x.Dimension : (i+1)*x.Dimension]
		hits := make([]hit, x.Ntotal())
		for r := range hits {
			var s float32
			for j, v := range x.Vectors[r*x.Dimension : (r+1)*x.Dimension] {
				s += v * qi[j]
			}
			hits[r] = hit{s, int64(r)}
		}
		sort.SliceStable(hits, func(a, b int) bool { return hits[a].score > hits[b].score })
		for j := range k {
			dist[i*k+j], labels[i*k+j] = float32(math.Inf(-1)), -1
			if j < len(hits) {
				dist[i*k+j], labels[i*k+j] = hits[j].score, hits[j].row
			}
		}
	}
	return nil
}

// Docs is an in-memory corpus: Lines[i] is the raw JSON row i.
type Docs struct{ Lines []string }

func (d *Docs) Len() int64 { return int64(len(d.Lines)) }

func (d *Docs) Row(i int64) ([]byte, error) {
	if i < 0 || i >= int64(len(d.Lines)) {
		return nil, fmt.Errorf("row %d out of range [0, %d)", i, len(d.Lines))
	}
	return []byte(d.Lines[i]), nil
}

// Pages maps a normalized URL to its raw JSON row.
type Pages map[string]string

func (p Pages) Lookup(url string) ([]byte, bool) {
	row, ok := p[strings.Replace(url, "index.php/", "index.php?title=", 1)]
	return []byte(row), ok
}

// Corpus builds Docs rows {"id","contents","url"} from texts and a FlatIndex of their
// HashEncoder vectors, so that row i of the index is line i of the corpus.
func Corpus(enc *HashEncoder, texts []string) (*Docs, *FlatIndex) {
	docs := &Docs{}
	for i, t := range texts {
		docs.Lines = append(docs.Lines, fmt.Sprintf(`{"id": "%d", "contents": %q, "url": "https://en.wikipedia.org/w/index.php?title=Doc%d"}`, i, t, i))
	}
	vecs, _ := enc.Encode(texts, "")
	return docs, &FlatIndex{Dimension: enc.Dimension, Vectors: vecs}
}

// EvenRowsBad reports every even row of DocStore as a bad line, as docstore does for a
// line that is not a JSON object with a string contents.
type EvenRowsBad struct{ engine.DocStore }

func (d EvenRowsBad) Row(i int64) ([]byte, error) {
	if i%2 == 0 {
		return nil, &docstore.BadRowError{Path: "corpus.jsonl", Line: i + 1, Reason: "not a JSON object"}
	}
	return d.DocStore.Row(i)
}

// FailingDevice is an index on a device that can fail, as the GPU index's device can: once
// Fail is called, Search fails and Err says why (engine.Retriever.IndexErr).
type FailingDevice struct {
	*FlatIndex
	failed atomic.Pointer[error]
}

// Fail makes the device fail with err.
func (x *FailingDevice) Fail(err error) { x.failed.Store(&err) }

func (x *FailingDevice) Err() error {
	if p := x.failed.Load(); p != nil {
		return *p
	}
	return nil
}

func (x *FailingDevice) Search(q []float32, k int, dist []float32, labels []int64) error {
	if err := x.Err(); err != nil {
		return err
	}
	return x.FlatIndex.Search(q, k, dist, labels)
}

// RemoteIndex is an Index in another process (an engine.Checker, as Milvus is) that can go
// down: while Down is set, Search and Check fail with an error wrapping engine.ErrUnavailable.
type RemoteIndex struct {
	engine.Index
	Down atomic.Bool
}

func (x *RemoteIndex) Search(q []float32, k int, dist []float32, labels []int64) error {
	if err := x.Check(context.Background()); err != nil {
		return err
	}
	return x.Index.Search(q, k, dist, labels)
}

func (x *RemoteIndex) Check(context.Context) error {
	if x.Down.Load() {
		return fmt.Errorf("%w: the test's remote index is down", engine.ErrUnavailable)
	}
	return nil
}
