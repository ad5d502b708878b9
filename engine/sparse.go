package engine

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"needle/docstore"
	"needle/index/bm25"
	"needle/index/indexdir"
	"needle/internal/option"
)

// BackendBM25 is what IndexBackend reports for a BM25 index served alone (`needle build
// --bm25`; Search-R1's `--retriever_name bm25`).
const BackendBM25 = "bm25"

// servesBM25Alone reports whether opts ask for the BM25 index alone: --retriever_name bm25,
// or an --index folder holding a BM25 index and no dense build.
func servesBM25Alone(opts Options) bool {
	if opts.BM25 != "" {
		return false
	}
	if strings.EqualFold(opts.RetrieverName, "bm25") {
		return true
	}
	_, err := os.Stat(filepath.Join(opts.Index, indexdir.ManifestName))
	return bm25.IsIndex(opts.Index) && errors.Is(err, os.ErrNotExist)
}

// NewSearcherRetriever serves s, which ranks the rows of docs, without an encoder (no
// Batcher): BM25 alone. ntotal is the number of rows s ranks.
func NewSearcherRetriever(s Searcher, ntotal int64, docs DocStore, pages PageStore) (*Retriever, error) {
	if docs.Len() != ntotal {
		return nil, fmt.Errorf("corpus has %d rows but the index has %d (row i of the index must be line i of the corpus)", docs.Len(), ntotal)
	}
	return &Retriever{searcher: s, docs: docs, pages: pages, ntotal: ntotal}, nil
}

// openBM25Alone opens the BM25 index folder opts.Index with its corpus (opts.Corpus, else the
// one it was built from) and pages.
func openBM25Alone(opts Options) (*Retriever, error) {
	x, err := bm25.Open(opts.Index)
	if err != nil {
		return nil, option.Wrap("Index", err)
	}
	corpusPath := cmp.Or(opts.Corpus, x.Meta().Corpus.Path)
	corpus, err := docstore.OpenCorpus(corpusPath, docstore.Options{})
	if err != nil {
		x.Close()
		return nil, option.Wrap("Corpus", err)
	}
	closers := []func(){func() { corpus.Close() }, func() { x.Close() }}
	var ps PageStore
	if opts.Pages != "" {
		pages, err := docstore.OpenPages(opts.Pages, docstore.Options{})
		if err != nil {
			closeAll(closers)
			return nil, option.Wrap("Pages", err)
		}
		ps, closers = pages, append(closers, func() { pages.Close() })
	}
	lanes := &laneSearcher{Searcher: x, maxInteractive: opts.Batcher.MaxBatch}
	r, err := NewSearcherRetriever(lanes, x.Ntotal(), corpus, ps)
	if err != nil {
		closeAll(closers)
		return nil, fmt.Errorf("%s with %s: %w", opts.Index, corpusPath, err)
	}
	r.closers, r.backend = closers, BackendBM25
	return r.WithCache(opts.CacheBytes), nil
}

// withBM25 makes r answer with the fusion of its dense search and the BM25 index opts.BM25
// (Options.Fusion says how).
func (r *Retriever) withBM25(opts Options) error {
	x, err := bm25.Open(opts.BM25)
	if err != nil {
		return option.Wrap("BM25", err)
	}
	if x.Ntotal() != r.ntotal {
		x.Close()
		return option.Errorf("BM25", "%s has %d rows, the dense index %d: build both from the same corpus", opts.BM25, x.Ntotal(), r.ntotal)
	}
	f, err := NewFusion(r.batcher, x, opts.Fusion)
	if err != nil {
		x.Close()
		return err
	}
	r.searcher, r.backend = f, r.backend+"+"+BackendBM25
	r.closers = append(r.closers, func() { x.Close() })
	return nil
}
