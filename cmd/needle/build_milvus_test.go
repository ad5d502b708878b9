package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"needle/testkit/milvustest"
	"needle/testkit/testenv"
)

// needle build --milvus from a FAISS flat index file (the anchors' e5_Flat.index shape) into
// a real Milvus with HNSW, then needle bench recall --milvus: recall@10 against the exact
// index >= 0.98; a rerun is a resume with nothing left to insert.
func TestBuildMilvusWordNetRecall(t *testing.T) {
	model := testenv.MiniLMDir(t)
	tools := newBuildTools(t)
	srv := milvustest.Start(t)
	data := tools.wordnetSubset("2000") // past the 1,024 rows under which Milvus leaves a segment to its interim IVF index
	corpus, flat := filepath.Join(data, "corpus.jsonl"), filepath.Join(t.TempDir(), "flat")
	tools.run("build", "--corpus", corpus, "--model", model, "--out", flat, "--prefix", "")
	args := []string{"build", "--milvus", srv.Addr, "--collection", "wordnet", "--corpus", corpus,
		"--embeddings", filepath.Join(flat, "index.faiss"), "--milvus-index", "HNSW"}
	if out := tools.run(args...); !strings.Contains(out, `holds 2000 rows`) {
		t.Fatalf("build output:\n%s", out)
	}
	if out := tools.run(args...); !strings.Contains(out, "inserted 0 rows") || !strings.Contains(out, "2000 came from an earlier run") {
		t.Fatalf("rerun output:\n%s", out)
	}
	out := tools.run("bench", "recall", "--index", flat, "--queries", filepath.Join(data, "queries.jsonl"),
		"--milvus", srv.Addr, "--collection", "wordnet")
	var r struct {
		Recall10 float64 `json:"recall_at_10_vs_index"`
		Recall5  float64 `json:"recall_at_5"`
	}
	if err := json.Unmarshal([]byte(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]), &r); err != nil {
		t.Fatalf("bench recall output %q: %v", out, err)
	}
	t.Logf("milvus HNSW over 2000 WordNet synsets: recall@10 vs exact %.4f, gold recall@5 %.3f", r.Recall10, r.Recall5)
	if r.Recall10 < 0.98 {
		t.Errorf("recall@10 against the exact index %.4f < 0.98", r.Recall10)
	}
}
