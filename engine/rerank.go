package engine

import (
	"context"
	"errors"
	"slices"

	"needle/encoder/rerank"
	"needle/internal/option"
)

// Ranked is one reranked passage: its index in the list given to Rerank and its score.
type Ranked struct {
	Index int
	Score float32
}

// ErrNoReranker is Rerank's error on a Retriever opened without Options.RerankModel.
var ErrNoReranker = errors.New("this server has no reranker")

// HasReranker reports whether a cross-encoder was loaded (Options.RerankModel).
func (r *Retriever) HasReranker() bool { return r.reranker != nil }

// Rerank scores each query against its own passages with the cross-encoder, all pairs in one
// call (batches of the reranker's size), and returns each query's passages best first; equal
// scores keep their given order (Python's stable sorted, as Search-R1's reranker sorts).
func (r *Retriever) Rerank(ctx context.Context, queries []string, passages [][]string) ([][]Ranked, error) {
	if r.reranker == nil {
		return nil, ErrNoReranker
	}
	var qs, ps []string
	for q, list := range passages {
		for _, p := range list {
			qs, ps = append(qs, queries[q]), append(ps, p)
		}
	}
	scores, err := r.reranker.Score(ctx, qs, ps)
	if err != nil {
		return nil, err
	}
	out := make([][]Ranked, len(queries))
	next := 0
	for q, list := range passages {
		ranked := make([]Ranked, len(list))
		for i := range list {
			ranked[i] = Ranked{i, scores[next]}
			next++
		}
		slices.SortStableFunc(ranked, func(a, b Ranked) int {
			switch {
			case a.Score > b.Score:
				return -1
			case a.Score < b.Score:
				return 1
			}
			return 0
		})
		out[q] = ranked
	}
	return out, nil
}

// withReranker loads the cross-encoder of opts.RerankModel into r.
func (r *Retriever) withReranker(opts Options) error {
	c, err := rerank.Load(opts.RerankModel, rerank.Options{BatchSize: opts.RerankBatch, Threads: opts.Threads})
	if err != nil {
		return option.Wrap("RerankModel", err)
	}
	r.WithReranker(c)
	return nil
}

// WithReranker makes r rerank with c (Open does it for Options.RerankModel) and returns r;
// call it before the first request.
func (r *Retriever) WithReranker(c *rerank.CrossEncoder) *Retriever {
	r.reranker = c
	return r
}

// withReranker returns a step of Open that adds the reranker to an opened Retriever (or
// passes its error on), closing it when the reranker fails to load.
func withReranker(r *Retriever, err error) func(Options) (*Retriever, error) {
	return func(opts Options) (*Retriever, error) {
		if err != nil || opts.RerankModel == "" {
			return r, err
		}
		if err := r.withReranker(opts); err != nil {
			r.Close()
			return nil, err
		}
		return r, nil
	}
}
