package indexbuild

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"needle/index/indexdir"

	"needle/faissgo"
)

// inspectFixture writes a flat IP index of n vectors and a corpus of rows lines whose
// line 3 has no "contents", and returns their paths.
func inspectFixture(t *testing.T, n, rows int) (index, corpus string) {
	t.Helper()
	dir := t.TempDir()
	x, err := faissgo.New(4, "Flat", faissgo.IP)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if err := x.Add(make([]float32, 4*n)); err != nil {
		t.Fatal(err)
	}
	index = filepath.Join(dir, "index.faiss")
	if err := x.WriteFile(index); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := 0; i < rows; i++ {
		if i == 2 {
			b.WriteString(`{"id": "2", "text": "no contents"}` + "\n")
			continue
		}
		b.WriteString(`{"id": "x", "contents": "\"Title\"\ntext"}` + "\n")
	}
	corpus = filepath.Join(dir, "corpus.jsonl")
	if err := os.WriteFile(corpus, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return index, corpus
}

func runInspectTo(t *testing.T, a InspectOptions) (string, error) {
	t.Helper()
	var out bytes.Buffer
	a.Log = io.Discard
	err := Inspect(&out, a)
	return out.String(), err
}

func wantLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(out, l+"\n") {
			t.Errorf("output lacks %q:\n%s", l, out)
		}
	}
}

func TestInspectIndexAndCorpus(t *testing.T) {
	index, corpus := inspectFixture(t, 5, 5)
	out, err := runInspectTo(t, InspectOptions{Index: index, Corpus: corpus, Load: true})
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, out, "type:        IndexFlatIP (file tag IxFI)", "dimension:   4", "count:       5",
		"metric:      IP", "loaded:      IndexFlatIP, 5 vectors, trained true", "corpus rows: 5",
		"bad rows:    1", `  line 3: no "contents" field`, "match:       yes (index count = corpus rows)")
}

func TestInspectMismatch(t *testing.T) {
	index, _ := inspectFixture(t, 5, 5)
	_, corpus := inspectFixture(t, 1, 7)
	out, err := runInspectTo(t, InspectOptions{Index: index, Corpus: corpus, MaxBad: 1})
	if err == nil || !strings.Contains(err.Error(), "has 5 vectors but corpus") || !strings.Contains(err.Error(), "has 7 rows") {
		t.Errorf("mismatch error: %v", err)
	}
	wantLines(t, out, "match:       NO (index count 5, corpus rows 7)")
}

func TestInspectBuildFolder(t *testing.T) {
	index, corpus := inspectFixture(t, 5, 5)
	dir := filepath.Dir(index)
	m := &indexdir.Manifest{Model: "/models/m", Dimension: 4, Count: 5, Factory: "Flat", Metric: "ip",
		IndexFile: "index.faiss", Corpus: indexdir.CorpusInfo{Path: corpus}}
	if err := indexdir.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	out, err := runInspectTo(t, InspectOptions{Index: dir})
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, out, `manifest:    factory Flat, model "/models/m", count 5, dimension 4`, "corpus rows: 5", "match:       yes (index count = corpus rows)")

	m.Count = 6
	if err := indexdir.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	if _, err := runInspectTo(t, InspectOptions{Index: dir}); err == nil || !strings.Contains(err.Error(), "manifest says 6 vectors") {
		t.Errorf("manifest mismatch: %v", err)
	}
}

func TestInspectBadInput(t *testing.T) {
	index, corpus := inspectFixture(t, 5, 5)
	data, _ := os.ReadFile(index)
	if err := os.WriteFile(index, data[:len(data)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runInspectTo(t, InspectOptions{Index: index, Corpus: corpus}); err == nil || !strings.Contains(err.Error(), index) {
		t.Errorf("truncated index: %v", err)
	}
	if _, err := runInspectTo(t, InspectOptions{Index: filepath.Join(t.TempDir(), "missing")}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing index: %v", err)
	}
}
