package indexdir

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"needle/internal/jsonfile"
	"needle/internal/option"
)

func sampleManifest() *Manifest {
	return &Manifest{
		Model: "/models/e5", Dimension: 384, Count: 3, Factory: "Flat", Metric: "ip",
		Prefix: "passage: ", MaxLength: 256, Pooling: "mean", Normalize: true,
		IndexFile: "index.faiss", EmbeddingsFile: "emb.memmap",
		Corpus:  CorpusInfo{Path: "/c.jsonl", Size: 10, Mtime: 1, Hash: "sha256:00"},
		BadRows: []BadRow{{Line: 2, Reason: "not JSON"}},
	}
}

func TestManifestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := sampleManifest()
	if err := WriteManifest(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Corpus != want.Corpus || got.BadRows[0] != want.BadRows[0] || got.Prefix != want.Prefix ||
		got.Dimension != want.Dimension || got.EmbeddingsFile != want.EmbeddingsFile {
		t.Fatalf("round trip: got %+v, want %+v", got, want)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("folder holds %d entries, want only %s (no temp file left)", len(entries), ManifestName)
	}
}

// TestManifestTravelsWithItsFolder: a corpus and a model inside the folder are recorded relative
// to it, so a copy of the folder elsewhere names its own files; a corpus outside stays absolute.
func TestManifestTravelsWithItsFolder(t *testing.T) {
	root := t.TempDir()
	dir, copied := filepath.Join(root, "idx"), filepath.Join(root, "copy")
	m := sampleManifest()
	m.Corpus.Path, m.Model = filepath.Join(dir, "corpus.jsonl"), filepath.Join(dir, "model")
	for _, d := range []string{dir, copied} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	var raw Manifest
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, ManifestName)), &raw); err != nil {
		t.Fatal(err)
	}
	if raw.Corpus.Path != "corpus.jsonl" || raw.Model != "model" {
		t.Errorf("recorded corpus %q, model %q: want them relative to the folder", raw.Corpus.Path, raw.Model)
	}
	if err := os.WriteFile(filepath.Join(copied, ManifestName), mustRead(t, filepath.Join(dir, ManifestName)), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadManifest(copied)
	if err != nil {
		t.Fatal(err)
	}
	if got.Corpus.Path != filepath.Join(copied, "corpus.jsonl") || got.Model != filepath.Join(copied, "model") {
		t.Errorf("the copy names corpus %q, model %q", got.Corpus.Path, got.Model)
	}
	m.Corpus.Path = filepath.Join(root, "outside.jsonl") // an older manifest's absolute path reads the same
	if err := WriteManifest(copied, m); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadManifest(copied); err != nil || got.Corpus.Path != m.Corpus.Path {
		t.Errorf("an outside corpus: %v, %v", got, err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every bad field is refused with an error naming the file and the field.
func TestReadManifestErrors(t *testing.T) {
	cases := []struct {
		edit func(m *Manifest)
		want string
	}{
		{func(m *Manifest) { m.Dimension = 0 }, "field dimension"},
		{func(m *Manifest) { m.Count = -1 }, "field count"},
		{func(m *Manifest) { m.Metric = "cosine" }, "field metric"},
		{func(m *Manifest) { m.Factory = "" }, "field factory"},
		{func(m *Manifest) { m.IndexFile = "../x.faiss" }, "field index_file"},
		{func(m *Manifest) { m.EmbeddingsFile = "/tmp/e" }, "field embeddings_file"},
		{func(m *Manifest) { m.Pooling = "max" }, "field pooling"},
		{func(m *Manifest) { m.Precision = "fp32" }, "field precision"},
		{func(m *Manifest) { m.BadRows[0].Line = 4 }, "field bad_rows[0].line"},
	}
	for _, c := range cases {
		dir := t.TempDir()
		m := sampleManifest()
		c.edit(m)
		if err := WriteManifest(dir, m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("WriteManifest: err %v, want it to name %q", err, c.want)
		}
		// Bypass the writer's check: serve must refuse such a file too.
		writeJSON(t, filepath.Join(dir, ManifestName), m)
		_, err := ReadManifest(dir)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), ManifestName) {
			t.Errorf("ReadManifest: err %v, want it to name %s and %q", err, ManifestName, c.want)
		}
	}
	dir := t.TempDir()
	if _, err := ReadManifest(dir); err == nil || !strings.Contains(err.Error(), "no manifest") {
		t.Errorf("missing manifest: err %v", err)
	}
	os.WriteFile(filepath.Join(dir, ManifestName), []byte(`{"dimension": "x"}`), 0o644)
	if _, err := ReadManifest(dir); err == nil || !strings.Contains(err.Error(), ManifestName) {
		t.Errorf("bad JSON: err %v", err)
	}
}

func FuzzReadManifest(f *testing.F) {
	f.Add([]byte(`{"dimension":4,"count":1,"factory":"Flat","metric":"ip","index_file":"index.faiss"}`))
	f.Add([]byte(`{"dimension":4,"count":1,"factory":"Flat","metric":"l2","index_file":"a/b","bad_rows":[{"line":0}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ManifestName), data, 0o644)
		m, err := ReadManifest(dir)
		if err == nil && (m.Dimension <= 0 || !jsonfile.LocalName(m.IndexFile)) {
			t.Fatalf("accepted invalid manifest %+v", m)
		}
	})
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestQueryPrecision(t *testing.T) {
	for _, c := range []struct {
		model, built, asked string
		force               bool
		want                string // "" = an error
	}{
		{"/m", "int8", "", false, "int8"},    // the build's by default
		{"/m", "", "", false, "fp16"},        // a build from before the field encoded at fp16
		{"/m", "", "int8", false, ""},        // ... so int8 queries are a mismatch
		{"/m", "fp16", "int8", false, ""},    // a mismatch is an error
		{"/m", "fp16", "int8", true, "int8"}, // unless forced
		{"/m", "int8", "int8", false, "int8"},
		{"/m", "bf16", "", false, "bf16"},
		{"/m", "bf16", "fp16", false, ""},
		{"", "", "int8", false, "int8"}, // --embeddings builds name no precision
		{"", "", "", false, "fp16"},
	} {
		m := sampleManifest()
		m.Model, m.Precision = c.model, c.built
		got, err := m.QueryPrecision(c.asked, c.force)
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("%+v: got %q, %v", c, got, err)
		}
		if err != nil && !option.FixedBy(err, "ForcePrecision") {
			t.Errorf("%+v: error %q does not say how to force", c, err)
		}
	}
}
