package bench

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	"needle/encoder/bert"
	"needle/faissgo"
	"needle/index/indexdir"
	"needle/index/milvusindex"
	"needle/internal/option"
)

// RecallOptions are the flags of `needle bench recall`.
type RecallOptions struct {
	Index       string  // a `needle build` output folder (manifest.json, index.faiss)
	Queries     string  // JSONL, {"query": text, "gold": row} per line, as tools/wordnet writes
	Model       string  // encoder model folder for the queries; "" = the manifest's model
	QueryPrefix string  // text prepended to every query (e5: "query: ")
	EfSearch    float64 // HNSW efSearch (0 = FAISS default)
	Nprobe      float64 // IVF nprobe (0 = FAISS default)
	// Milvus, when its URI is set, is a collection of the same rows (needle build --milvus)
	// searched instead of the index; the index then serves as the exact reference (Flat).
	Milvus milvusindex.Options
	// BM25, when set, is a `needle build --bm25` folder of the same corpus: dense, BM25 and
	// hybrid (RRF, weighted) are compared on the queries, a Markdown table to Table.
	BM25  string
	Table io.Writer
}

// milvusTimeout bounds Recall's one Milvus search of every query.
const milvusTimeout = 10 * time.Minute

// Specs declares the options (`needle bench recall`'s flags).
func (o *RecallOptions) Specs() option.Specs {
	s := option.Specs{
		option.String(&o.Index, "Index", "index", "", "a `needle build` output folder (manifest.json, index.faiss) (required)"),
		option.String(&o.Queries, "Queries", "queries", "", "queries JSONL, {\"query\": text, \"gold\": row} per line, as tools/wordnet writes (required)"),
		option.String(&o.Model, "Model", "model", "", "encoder model folder for the queries (default: the manifest's model)"),
		option.String(&o.QueryPrefix, "QueryPrefix", "query-prefix", "", "text prepended to every query (e5: \"query: \")"),
		option.Num(&o.EfSearch, "EfSearch", "ef-search", 0, option.From(0), "HNSW efSearch (0 = FAISS default)"),
		option.Num(&o.Nprobe, "Nprobe", "nprobe", 0, option.From(0), "IVF nprobe (0 = FAISS default)"),
		option.String(&o.BM25, "BM25", "bm25", "", "a needle build --bm25 folder of the same corpus: also compare BM25 and hybrid (RRF, weighted) with dense, a table on stderr"),
	}
	// Recall sets the Milvus timeout itself (milvusTimeout): every query goes in one search.
	milvus := slices.DeleteFunc(o.Milvus.Specs().Under("Milvus."), func(s option.Spec) bool { return s.Field == "Milvus.Timeout" })
	return append(s, milvus...)
}

// Recall encodes the queries at the build's precision, searches the index and writes
// recall@1, @5 and @10 against the gold rows to w as one JSON object. With a Milvus collection, the collection is searched
// and its recall@10 against the index (exact for Flat) is added.
func Recall(w io.Writer, opt RecallOptions) error {
	if err := errors.Join(option.Required("Index", opt.Index), option.Required("Queries", opt.Queries), opt.Specs().Check()); err != nil {
		return err
	}
	m, err := indexdir.ReadManifest(opt.Index)
	if err != nil {
		return err
	}
	if opt.Model == "" {
		opt.Model = m.Model
	}
	queries, err := ReadQueries(opt.Queries)
	if err != nil {
		return err
	}
	idx, err := faissgo.Read(filepath.Join(opt.Index, m.IndexFile), false)
	if err != nil {
		return err
	}
	defer idx.Close()
	for name, v := range map[string]float64{"efSearch": opt.EfSearch, "nprobe": opt.Nprobe} {
		if v > 0 {
			if err := idx.SetSearchParam(name, v); err != nil {
				return err
			}
		}
	}
	enc, err := bert.Load(opt.Model, bert.Options{MaxLength: m.MaxLength, Pooling: m.Pooling, Precision: bert.Precision(m.Precision)})
	if err != nil {
		return err
	}
	texts := make([]string, len(queries))
	gold := make([]int64, len(queries))
	for i, q := range queries {
		if q.Gold >= m.Count {
			return fmt.Errorf("%s: query %d has gold row %d, but the index has %d rows", opt.Queries, i+1, q.Gold, m.Count)
		}
		texts[i], gold[i] = q.Query, q.Gold
	}
	emb, err := enc.Encode(texts, opt.QueryPrefix)
	if err != nil {
		return err
	}
	out := map[string]any{"index": opt.Index, "factory": m.Factory, "rows": m.Count, "queries": len(queries),
		"precision": string(enc.Options().Precision)}
	var searched Searcher = idx
	if opt.Milvus.URI != "" {
		opt.Milvus.Timeout = milvusTimeout
		mx, err := milvusindex.Open(opt.Milvus)
		if err != nil {
			return err
		}
		defer mx.Close()
		if mx.Ntotal() != m.Count {
			return fmt.Errorf("%s holds %d rows, %s %d", mx.Describe(), mx.Ntotal(), opt.Index, m.Count)
		}
		exact, err := Agreement(mx, idx, emb, enc.Dim(), 10)
		if err != nil {
			return err
		}
		searched, out["milvus"], out["recall_at_10_vs_index"] = mx, mx.Describe(), exact
	}
	r, err := RecallAt(searched, emb, enc.Dim(), gold, []int{1, 5, 10})
	if err != nil {
		return err
	}
	out["recall_at_1"], out["recall_at_5"], out["recall_at_10"] = r[0], r[1], r[2]
	if opt.BM25 != "" {
		if out["retrievers_recall_at_1_3_10"], err = compareRetrievers(cmp.Or(opt.Table, io.Discard), searched, emb, enc.Dim(), opt.BM25, texts, gold); err != nil {
			return err
		}
	}
	return json.NewEncoder(w).Encode(out)
}
