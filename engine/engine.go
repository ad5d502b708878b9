// Package engine answers retrieval queries: a Retriever is an Encoder (query text ->
// vectors), an Index (vectors -> FAISS row numbers and scores) and a DocStore (row number ->
// raw corpus line), with a Batcher in front that coalesces the queries of concurrent
// requests into one encoder batch and one index search.
//
// engine does not import cgo: it works against the interfaces below, which engine/bert,
// faissgo and engine/docstore satisfy, so its tests and the server's run with fakes.
package engine

import "fmt"

// Encoder turns texts into L2-normalized vectors. Implementations must be safe for
// concurrent callers. Encode returns len(texts)*Dim() floats in input order; prefix is
// prepended to every text (e5's "query: ").
type Encoder interface {
	Dim() int
	Encode(texts []string, prefix string) ([]float32, error)
}

// Index is a vector index searched by inner product (or L2). Search reads n = len(x)/Dim()
// query vectors and writes n*k scores and row labels into the caller's buffers, best first;
// a label of -1 means no hit. Search must be safe for concurrent callers.
type Index interface {
	Dim() int
	Ntotal() int64
	Search(x []float32, k int, dist []float32, labels []int64) error
}

// DocStore returns corpus line i (0-based; line i is row i of the index) as one JSON
// object. The returned bytes are a read-only view valid until the store is closed.
type DocStore interface {
	Len() int64
	Row(i int64) ([]byte, error)
}

// PageStore finds a web page row (a JSON object) by URL, after the anchors' URL
// normalization. The returned bytes are a read-only view valid until the store is closed.
type PageStore interface {
	Lookup(url string) ([]byte, bool)
}

// Retriever is the loaded, ready-to-serve state of `needle serve`. Pages is nil when no
// pages file was given. Fields are set once before serving and read-only afterwards.
type Retriever struct {
	Batcher *Batcher
	Docs    DocStore
	Pages   PageStore
	// Ntotal is the number of index rows; topk is capped to it.
	Ntotal int64
}

// NewRetriever checks that the index, encoder and corpus agree (dimension, row count) and
// starts a Batcher over them. The caller closes the Batcher when done.
func NewRetriever(enc Encoder, idx Index, docs DocStore, pages PageStore, prefix string, opt BatcherOptions) (*Retriever, error) {
	if enc.Dim() != idx.Dim() {
		return nil, fmt.Errorf("encoder dimension %d does not match index dimension %d", enc.Dim(), idx.Dim())
	}
	if docs.Len() != idx.Ntotal() {
		return nil, fmt.Errorf("corpus has %d rows but the index has %d vectors (row i of the index must be line i of the corpus)", docs.Len(), idx.Ntotal())
	}
	return &Retriever{
		Batcher: NewBatcher(enc, idx, prefix, opt),
		Docs:    docs,
		Pages:   pages,
		Ntotal:  idx.Ntotal(),
	}, nil
}
