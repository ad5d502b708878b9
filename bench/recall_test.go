package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"needle/encoder/bert"
	"needle/faissgo"
	"needle/index/indexdir"
	"needle/testkit/testenv"
)

// recallIndex writes a `needle build`-shaped folder: a Flat index of passages encoded with
// the real MiniLM, and its manifest.
func recallIndex(t *testing.T, model string, passages []string) string {
	t.Helper()
	enc, err := bert.Load(model, bert.Options{})
	if err != nil {
		t.Fatal(err)
	}
	emb, err := enc.Encode(passages, "")
	if err != nil {
		t.Fatal(err)
	}
	idx, err := faissgo.New(enc.Dim(), "Flat", faissgo.IP)
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	dir := t.TempDir()
	if err := idx.Add(emb); err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(filepath.Join(dir, "index.faiss")); err != nil {
		t.Fatal(err)
	}
	m := &indexdir.Manifest{Model: model, Dimension: enc.Dim(), Count: int64(len(passages)), Factory: "Flat", Metric: "ip",
		MaxLength: enc.Options().MaxLength, Pooling: "mean", Normalize: true, IndexFile: "index.faiss"}
	if err := indexdir.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRecallReport(t *testing.T) {
	model := testenv.MiniLMDir(t)
	passages := []string{"The cat sat on the mat.", "Stock markets fell sharply on Monday.",
		"Photosynthesis turns light into chemical energy.", "The violin has four strings."}
	dir := recallIndex(t, model, passages)
	// Each query is a passage itself, so its own row comes first; the last query's gold row is
	// another passage's, found within the top 5 of 4 rows but not at 1.
	var q strings.Builder
	for i, p := range passages {
		json.NewEncoder(&q).Encode(Query{Query: p, Gold: int64(i)})
	}
	json.NewEncoder(&q).Encode(Query{Query: passages[0], Gold: 2})
	queries := writeQueries(t, q.String())
	var out bytes.Buffer
	if err := Recall(&out, RecallOptions{Index: dir, Queries: queries}); err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := map[string]any{"index": dir, "factory": "Flat", "rows": 4.0, "queries": 5.0, "precision": "fp16",
		"recall_at_1": 0.8, "recall_at_5": 1.0, "recall_at_10": 1.0}
	if fmt.Sprint(rep) != fmt.Sprint(want) {
		t.Errorf("report %v, want %v", rep, want)
	}

	bad := writeQueries(t, `{"query": "x", "gold": 4}`+"\n")
	if err := Recall(&out, RecallOptions{Index: dir, Queries: bad}); err == nil || !strings.Contains(err.Error(), "query 1 has gold row 4, but the index has 4 rows") {
		t.Errorf("gold past the index: err = %v", err)
	}
}

func TestRecallBadInput(t *testing.T) {
	if err := Recall(&bytes.Buffer{}, RecallOptions{Index: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "Queries: required") {
		t.Errorf("no queries: err = %v", err)
	}
	queries := writeQueries(t, `{"query": "x", "gold": 0}`+"\n")
	if err := Recall(&bytes.Buffer{}, RecallOptions{Index: t.TempDir(), Queries: queries}); err == nil || !strings.Contains(err.Error(), "no manifest") {
		t.Errorf("not a build folder: err = %v", err)
	}
}
