package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"needle/engine/bert"
	"needle/engine/indexbuild"
	"needle/faissgo"
)

func init() {
	registerBench(benchmark{name: "recall", summary: "recall@1/@5 of a `needle build` folder on a queries JSONL with gold rows (tools/wordnet)", run: runBenchRecall})
}

func runBenchRecall(args []string) error {
	fs := newFlagSet("bench recall", "--index DIR --queries Q.jsonl [--model DIR]")
	dir := fs.String("index", "", "a `needle build` output folder (manifest.json, index.faiss) (required)")
	queriesPath := fs.String("queries", "", "queries JSONL, {\"query\": text, \"gold\": row} per line, as tools/wordnet writes (required)")
	model := fs.String("model", "", "encoder model folder for the queries (default: the manifest's model)")
	prefix := fs.String("query-prefix", "", "text prepended to every query (e5: \"query: \")")
	efSearch := fs.Float64("ef-search", 0, "HNSW efSearch (0 = FAISS default)")
	nprobe := fs.Float64("nprobe", 0, "IVF nprobe (0 = FAISS default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *queriesPath == "" {
		return errors.New("--index and --queries are required (see --help)")
	}
	m, err := indexbuild.ReadManifest(*dir)
	if err != nil {
		return err
	}
	if *model == "" {
		*model = m.Model
	}
	queries, err := indexbuild.ReadQueries(*queriesPath)
	if err != nil {
		return err
	}
	idx, err := faissgo.Read(filepath.Join(*dir, m.IndexFile), false)
	if err != nil {
		return err
	}
	defer idx.Close()
	for name, v := range map[string]float64{"efSearch": *efSearch, "nprobe": *nprobe} {
		if v > 0 {
			if err := idx.SetSearchParam(name, v); err != nil {
				return err
			}
		}
	}
	enc, err := bert.Load(*model, bert.Options{MaxLength: m.MaxLength, Pooling: m.Pooling})
	if err != nil {
		return err
	}
	texts := make([]string, len(queries))
	gold := make([]int64, len(queries))
	for i, q := range queries {
		if q.Gold >= m.Count {
			return fmt.Errorf("%s: query %d has gold row %d, but the index has %d rows", *queriesPath, i+1, q.Gold, m.Count)
		}
		texts[i], gold[i] = q.Query, q.Gold
	}
	emb, err := enc.Encode(texts, *prefix)
	if err != nil {
		return err
	}
	r, err := indexbuild.Recall(idx, emb, enc.Dim(), gold, []int{1, 5})
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"index": *dir, "factory": m.Factory, "rows": m.Count, "queries": len(queries),
		"recall_at_1": r[0], "recall_at_5": r[1],
	})
}
