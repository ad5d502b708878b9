package bench

import (
	"context"
	"fmt"
	"io"

	"needle/engine"
	"needle/index/bm25"
	"needle/internal/option"
)

// denseText is the dense retriever as an engine.Searcher over query texts: the queries'
// embeddings (encoded once by Recall) searched in the vector index.
type denseText struct {
	idx   Searcher
	emb   []float32
	dim   int
	index map[string]int // query text -> its row of emb
}

func (d *denseText) Search(_ context.Context, queries []string, k int, dist []float32, labels []int64) error {
	x := make([]float32, 0, len(queries)*d.dim)
	for _, q := range queries {
		i := d.index[q]
		x = append(x, d.emb[i*d.dim:(i+1)*d.dim]...)
	}
	return d.idx.Search(x, k, dist, labels)
}

// recallKs are the cut-offs of the retriever comparison (README's table).
var recallKs = []int{1, 3, 10}

// compareRetrievers writes the recall@1/3/10 of dense, BM25 and their fusions (RRF, and
// weighted sums) on the same queries as one table to w, and returns the rows as JSON fields.
func compareRetrievers(w io.Writer, dense Searcher, emb []float32, dim int, bm25Dir string, texts []string, gold []int64) (map[string][]float64, error) {
	x, err := bm25.Open(bm25Dir)
	if err != nil {
		return nil, option.Wrap("BM25", err)
	}
	defer x.Close()
	d := &denseText{idx: dense, emb: emb, dim: dim, index: make(map[string]int, len(texts))}
	for i, t := range texts {
		if _, ok := d.index[t]; !ok {
			d.index[t] = i
		}
	}
	rows := []struct {
		name string
		s    func() (engine.Searcher, error)
	}{
		{"dense", func() (engine.Searcher, error) { return d, nil }},
		{"bm25", func() (engine.Searcher, error) { return x, nil }},
		{"hybrid rrf", func() (engine.Searcher, error) {
			return engine.NewFusion(d, x, engine.FusionOptions{Method: engine.FusionRRF})
		}},
		{"hybrid weighted 0.5", func() (engine.Searcher, error) {
			return engine.NewFusion(d, x, engine.FusionOptions{Method: engine.FusionWeighted, Weight: 0.5})
		}},
		{"hybrid weighted 0.7", func() (engine.Searcher, error) {
			return engine.NewFusion(d, x, engine.FusionOptions{Method: engine.FusionWeighted, Weight: 0.7})
		}},
	}
	out := map[string][]float64{}
	fmt.Fprintf(w, "| retriever | recall@1 | recall@3 | recall@10 |\n|---|---|---|---|\n")
	kmax := recallKs[len(recallKs)-1]
	for _, r := range rows {
		s, err := r.s()
		if err != nil {
			return nil, err
		}
		dist, labels := make([]float32, len(texts)*kmax), make([]int64, len(texts)*kmax)
		if err := s.Search(context.Background(), texts, kmax, dist, labels); err != nil {
			return nil, fmt.Errorf("%s: %w", r.name, err)
		}
		rec := recallOf(labels, kmax, gold, recallKs)
		out[r.name] = rec
		fmt.Fprintf(w, "| %s | %.3f | %.3f | %.3f |\n", r.name, rec[0], rec[1], rec[2])
	}
	return out, nil
}
