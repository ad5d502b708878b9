package main

import (
	"os"
	"time"

	"needle/bench"
)

func init() {
	benchmarks.add(command{name: "recall", summary: "recall@1/@5 of a `needle build` folder on a queries JSONL with gold rows (tools/wordnet)", run: runBenchRecall})
}

func runBenchRecall(args []string) error {
	var o bench.RecallOptions
	fs := newFlagSet("bench recall", "--index DIR --queries Q.jsonl [--model DIR]")
	fs.StringVar(&o.Index, "index", "", "a `needle build` output folder (manifest.json, index.faiss) (required)")
	fs.StringVar(&o.Queries, "queries", "", "queries JSONL, {\"query\": text, \"gold\": row} per line, as tools/wordnet writes (required)")
	fs.StringVar(&o.Model, "model", "", "encoder model folder for the queries (default: the manifest's model)")
	fs.StringVar(&o.QueryPrefix, "query-prefix", "", "text prepended to every query (e5: \"query: \")")
	fs.Float64Var(&o.EfSearch, "ef-search", 0, "HNSW efSearch (0 = FAISS default)")
	fs.Float64Var(&o.Nprobe, "nprobe", 0, "IVF nprobe (0 = FAISS default)")
	fs.StringVar(&o.Milvus.URI, "milvus", "", "search this Milvus (host:port) instead, collection --collection of the same rows; adds its recall@10 against --index (exact when Flat)")
	fs.StringVar(&o.Milvus.Collection, "collection", "", "with --milvus: the collection (needle build --milvus)")
	fs.IntVar(&o.Milvus.Ef, "milvus-ef", 0, "with --milvus: HNSW search list size (0 = 128)")
	fs.IntVar(&o.Milvus.Nprobe, "milvus-nprobe", 0, "with --milvus: IVF lists probed (0 = 32)")
	fs.StringVar(&o.BM25, "bm25", "", "a needle build --bm25 folder of the same corpus: also compare BM25 and hybrid (RRF, weighted) with dense, a table on stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Table = os.Stderr
	o.Milvus.Timeout = 10 * time.Minute // every query goes in one search
	return bench.Recall(os.Stdout, o)
}
