package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"needle/index/bm25"
	"needle/internal/option"
)

// TestOpenBM25Alone: a `needle build --bm25` folder is served without a model; a query
// without terms answers an empty list, not an error.
func TestOpenBM25Alone(t *testing.T) {
	// The corpus is read from a copy: serving writes its offsets sidecar beside it.
	tmp := t.TempDir()
	corpus, other := filepath.Join(tmp, "corpus.jsonl"), filepath.Join(tmp, "other.jsonl")
	for from, to := range map[string]string{"../index/bm25/testdata/corpus.jsonl": corpus, "../index/bm25/testdata/queries.jsonl": other} {
		b, err := os.ReadFile(from)
		if err == nil {
			err = os.WriteFile(to, b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(tmp, "bm25")
	if err := bm25.Build(bm25.BuildConfig{Corpus: corpus, Out: dir}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(Options{Index: dir, Batcher: option.Defaults[BatcherOptions]()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.IndexBackend() != BackendBM25 || r.Ntotal() != 2010 {
		t.Errorf("backend %q, %d rows", r.IndexBackend(), r.Ntotal())
	}
	hits, err := r.Retrieve(context.Background(), []string{"physical entity", "", "the and of"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits[0]) != 3 || !strings.Contains(string(hits[0][0].Row), `"physical entity`) || len(hits[1]) != 0 || len(hits[2]) != 0 {
		t.Errorf("hits %d %d %d, first %s", len(hits[0]), len(hits[1]), len(hits[2]), hits[0][0].Row)
	}
	if _, err := Open(Options{Index: dir, Corpus: other, Batcher: option.Defaults[BatcherOptions]()}); err == nil || !strings.Contains(err.Error(), "rows") {
		t.Errorf("a corpus of other rows: %v", err)
	}
}
