package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

// Query is one line of a queries JSONL with its gold corpus row (tools/wordnet writes them).
type Query struct {
	Query string `json:"query"`
	Gold  int64  `json:"gold"`
}

// ReadQueries reads a queries JSONL; a line without a query or with a negative gold row is
// an error naming the file and line.
func ReadQueries(path string) ([]Query, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var qs []Query
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for line := 1; sc.Scan(); line++ {
		q := Query{Gold: -1}
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, line, err)
		}
		if q.Query == "" || q.Gold < 0 {
			return nil, fmt.Errorf("%s line %d: want a non-empty \"query\" and a \"gold\" row >= 0", path, line)
		}
		qs = append(qs, q)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return qs, nil
}

// Searcher is the search half of a FAISS index (faissgo.Index).
type Searcher interface {
	Search(x []float32, k int, dist []float32, labels []int64) error
}

// RecallAt returns, for each k in ks, the fraction of queries whose gold row is among the k
// best hits of s for their embedding (emb holds len(gold) rows of width dim).
func RecallAt(s Searcher, emb []float32, dim int, gold []int64, ks []int) ([]float64, error) {
	n := len(gold)
	if len(emb) != n*dim {
		return nil, fmt.Errorf("recall: %d floats for %d queries of dim %d", len(emb), n, dim)
	}
	kmax := 0
	for _, k := range ks {
		kmax = max(kmax, k)
	}
	dist := make([]float32, n*kmax)
	labels := make([]int64, n*kmax)
	if err := s.Search(emb, kmax, dist, labels); err != nil {
		return nil, err
	}
	return recallOf(labels, kmax, gold, ks), nil
}

// recallOf is RecallAt's count over the kmax best labels of each query.
func recallOf(labels []int64, kmax int, gold []int64, ks []int) []float64 {
	n := len(gold)
	out := make([]float64, len(ks))
	for q := range n {
		for i, k := range ks {
			for _, l := range labels[q*kmax : q*kmax+k] {
				if l == gold[q] {
					out[i]++
					break
				}
			}
		}
	}
	for i := range out {
		out[i] /= float64(max(n, 1))
	}
	return out
}

// Agreement returns recall@k of s against exact (an exact search, a Flat index): the
// fraction of the k hits s returns per query that score at least as well as exact's k-th
// best, over the queries in emb. Scores, not row numbers, are compared (ann-benchmarks'
// way), so rows tied at the k-th score (duplicate passages) count whichever one s returns;
// both must score alike (inner products, or L2 distances, of the same vectors).
func Agreement(s, exact Searcher, emb []float32, dim, k int) (float64, error) {
	n := len(emb) / dim
	var labels [2][]int64
	var dist [2][]float32
	for i, x := range []Searcher{s, exact} {
		labels[i], dist[i] = make([]int64, n*k), make([]float32, n*k)
		if err := x.Search(emb, k, dist[i], labels[i]); err != nil {
			return 0, err
		}
	}
	const eps = 1e-5
	found := 0
	for q := range n {
		best, kth := dist[1][q*k], dist[1][(q+1)*k-1]
		for j := q * k; j < (q+1)*k; j++ {
			d := dist[0][j]
			if labels[0][j] >= 0 && ((best >= kth && d >= kth-eps) || (best < kth && d <= kth+eps)) {
				found++
			}
		}
	}
	return float64(found) / float64(max(n*k, 1)), nil
}
