package indexbuild

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
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

// Recall returns, for each k in ks, the fraction of queries whose gold row is among the k
// best hits of s for their embedding (emb holds len(gold) rows of width dim).
func Recall(s Searcher, emb []float32, dim int, gold []int64, ks []int) ([]float64, error) {
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
	return out, nil
}

// Agreement returns recall@k of s against exact: the fraction of exact's k best rows (an
// exact search, a Flat index) that s also returns among its k best, over the queries in emb.
func Agreement(s, exact Searcher, emb []float32, dim, k int) (float64, error) {
	n := len(emb) / dim
	labels := [2][]int64{make([]int64, n*k), make([]int64, n*k)}
	for i, x := range []Searcher{s, exact} {
		if err := x.Search(emb, k, make([]float32, n*k), labels[i]); err != nil {
			return 0, err
		}
	}
	found := 0
	for q := range n {
		got := labels[0][q*k : (q+1)*k]
		for _, l := range labels[1][q*k : (q+1)*k] {
			if l >= 0 && slices.Contains(got, l) {
				found++
			}
		}
	}
	return float64(found) / float64(max(n*k, 1)), nil
}
