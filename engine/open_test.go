package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"needle/encoder/bert"
	"needle/engine"
	"needle/faissgo"
	"needle/index/compact"
	"needle/index/indexdir"
	"needle/internal/option"
	"needle/testkit/cudatest"
	"needle/testkit/enginetest"
	"needle/testkit/testenv"
	"needle/testkit/testflat"
)

// writeManifest makes dir a minimal `needle build` output folder with passage prefix prefix
// (its index file holds no index: Resolve does not read it).
func writeManifest(t *testing.T, dir, prefix string) {
	t.Helper()
	m := &indexdir.Manifest{Model: "/models/m", Dimension: 4, Count: 1, Factory: "Flat", Metric: "ip", Prefix: prefix,
		MaxLength: 256, Pooling: "mean", Normalize: true, IndexFile: "index.faiss",
		Corpus: indexdir.CorpusInfo{Path: "/data/corpus.jsonl"}}
	if err := indexdir.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, m.IndexFile), []byte("x"), 0o644)
}

func ptr(s string) *string { return &s }

// writeForm makes dir a minimal `needle convert` folder of the index file source (Resolve
// reads only compact.json).
func writeForm(t *testing.T, dir, source string) {
	t.Helper()
	data, _ := json.Marshal(compact.Form{Factory: "IVF4,PQ4np", IndexFile: compact.IndexFileName, Dimension: 4, Count: 1, Metric: "ip",
		Source: compact.Source{Path: source}, Rescore: 10})
	os.WriteFile(filepath.Join(dir, compact.FormName), data, 0o644)
}

func TestResolve(t *testing.T) {
	e5, plain := t.TempDir(), t.TempDir()
	writeManifest(t, e5, "passage: ")
	writeManifest(t, plain, "")
	bare := filepath.Join(t.TempDir(), "e5_Flat.index")
	os.WriteFile(bare, []byte("x"), 0o644)
	ofBuild, ofBare := t.TempDir(), t.TempDir() // compact forms of a build's index and of a bare file
	writeForm(t, ofBuild, filepath.Join(e5, "index.faiss"))
	writeForm(t, ofBare, bare)
	for _, tc := range []struct {
		name                                  string
		opts                                  engine.Options
		index, corpus, model, pooling, prefix string
		err                                   string
	}{
		{"manifest fills corpus and model", engine.Options{Index: plain}, filepath.Join(plain, "index.faiss"), "/data/corpus.jsonl", "/models/m", "mean", "", ""},
		{"e5 manifest sets query prefix", engine.Options{Index: e5}, filepath.Join(e5, "index.faiss"), "/data/corpus.jsonl", "/models/m", "mean", "query: ", ""},
		{"explicit empty prefix wins", engine.Options{Index: e5, QueryPrefix: ptr("")}, filepath.Join(e5, "index.faiss"), "/data/corpus.jsonl", "/models/m", "mean", "", ""},
		{"options win over the manifest", engine.Options{Index: plain, Corpus: "c.jsonl", Model: "/m/other", Pooling: "cls", RetrieverName: "intfloat/E5-base"},
			filepath.Join(plain, "index.faiss"), "c.jsonl", "/m/other", "cls", "query: ", ""},
		{"bare index, e5 name", engine.Options{Index: bare, Corpus: "c.jsonl", Model: "/m/e5-base-v2", RetrieverName: "e5"}, bare, "c.jsonl", "/m/e5-base-v2", "", "query: ", ""},
		{"bare index needs corpus", engine.Options{Index: bare, Model: "m"}, "", "", "", "", "", "Corpus: required"},
		{"bare index needs model", engine.Options{Index: bare, Corpus: "c"}, "", "", "", "", "", "Model: required"},
		{"index not found", engine.Options{Index: "/nonexistent/x"}, "", "", "", "", "", "no such file"},
		{"folder without manifest", engine.Options{Index: t.TempDir()}, "", "", "", "", "", "no manifest"},
		{"form of a build: its manifest", engine.Options{Index: ofBuild}, ofBuild, "/data/corpus.jsonl", "/models/m", "mean", "query: ", ""},
		{"form of a bare file", engine.Options{Index: ofBare, Corpus: "c.jsonl", Model: "/m/e5", RetrieverName: "e5"}, ofBare, "c.jsonl", "/m/e5", "", "query: ", ""},
		{"form of a bare file needs corpus", engine.Options{Index: ofBare, Model: "m"}, "", "", "", "", "", "Corpus: required"},
		{"hybrid: a fusion weight out of range", engine.Options{Index: plain, BM25: plain, Fusion: engine.FusionOptions{Method: engine.FusionWeighted, Weight: 1.5}},
			"", "", "", "", "", "Fusion.Weight: 1.5, want"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := engine.Resolve(tc.opts)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Index != tc.index || got.Corpus != tc.corpus || got.Model != tc.model || got.Pooling != tc.pooling ||
				*got.QueryPrefix != tc.prefix {
				t.Errorf("got index %q corpus %q model %q pooling %q prefix %q", got.Index, got.Corpus, got.Model, got.Pooling, *got.QueryPrefix)
			}
			again, err := engine.Resolve(got)
			if err != nil || again.Index != got.Index || again.Corpus != got.Corpus || again.Model != got.Model ||
				again.Pooling != got.Pooling || *again.QueryPrefix != *got.QueryPrefix {
				t.Errorf("resolving again changed %+v into %+v (%v)", got, again, err)
			}
		})
	}
}

// The query encoder's precision comes from the manifest; another one is refused unless forced.
func TestResolvePrecision(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "")
	m, err := indexdir.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	m.Precision = "int8"
	if err := indexdir.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	if got, err := engine.Resolve(engine.Options{Index: dir}); err != nil || got.Precision != "int8" {
		t.Errorf("default: precision %q, %v; want the manifest's int8", got.Precision, err)
	}
	if _, err := engine.Resolve(engine.Options{Index: dir, Precision: "fp16"}); !option.FixedBy(err, "ForcePrecision") {
		t.Errorf("fp16 on an int8 build: %v, want an error that ForcePrecision fixes", err)
	}
	if got, err := engine.Resolve(engine.Options{Index: dir, Precision: "fp16", ForcePrecision: true}); err != nil || got.Precision != "fp16" {
		t.Errorf("forced fp16: precision %q, %v", got.Precision, err)
	}
}

// writeFlatIndex writes a FAISS flat IP index of vecs (rows of dim floats) to path.
func writeFlatIndex(t *testing.T, path string, dim int, vecs []float32) {
	testflat.WriteFlat(t, path, faissgo.IP, dim, int64(len(vecs)/dim), testflat.Rows(vecs, dim))
}

// passages are the texts of the real-parts tests.
var passages = []string{"a needle is a thin pointed steel pin", "the cat sat on the mat", "rivers flow into the sea"}

// realParts writes texts as a corpus (dir/corpus.jsonl) and a flat index of their MiniLM
// vectors (dir/flat.index) into a new folder dir; it returns the model folder, dir, the
// corpus text and the vectors.
func realParts(t *testing.T, texts []string) (model, dir, corpus string, vecs []float32) {
	model, dir = testenv.MiniLMDir(t), t.TempDir()
	var b strings.Builder
	for i, s := range texts {
		fmt.Fprintf(&b, "{\"id\": \"%d\", \"contents\": %q}\n", i, s)
	}
	os.WriteFile(filepath.Join(dir, "corpus.jsonl"), []byte(b.String()), 0o644)
	enc, err := bert.Load(model, bert.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if vecs, err = enc.Encode(texts, ""); err != nil {
		t.Fatal(err)
	}
	writeFlatIndex(t, filepath.Join(dir, "flat.index"), enc.Dim(), vecs)
	return model, dir, b.String(), vecs
}

// Open on real parts: MiniLM, a flat index of the passages' own vectors, the corpus and a
// pages file. Each passage, asked as a query, finds its own row first.
func TestOpenServesRealParts(t *testing.T) {
	texts := passages
	model, dir, corpus, _ := realParts(t, texts)
	var pages strings.Builder
	for i, s := range texts {
		fmt.Fprintf(&pages, "{\"url\": \"https://example.org/%d\", \"contents\": %q}\n", i, s)
	}
	corpusPath, pagesPath, indexPath := filepath.Join(dir, "corpus.jsonl"), filepath.Join(dir, "pages.jsonl"), filepath.Join(dir, "flat.index")
	os.WriteFile(pagesPath, []byte(pages.String()), 0o644)

	// A flat file is mapped unless FAISS is asked for.
	for backend, want := range map[string]string{"": engine.BackendMapped, engine.BackendFAISS: engine.BackendFAISS, engine.BackendMapped: engine.BackendMapped} {
		r, err := engine.Open(enginetest.Options(engine.Options{Index: indexPath, Corpus: corpusPath, Pages: pagesPath, Model: model, QueryPrefix: ptr(""), Backend: backend}))
		if err != nil {
			t.Fatal(err)
		}
		if r.IndexBackend() != want {
			t.Errorf("backend %q: serves with %q, want %q", backend, r.IndexBackend(), want)
		}
		got, err := r.Retrieve(context.Background(), texts, 2)
		if err != nil {
			t.Fatal(err)
		}
		for q, hits := range got {
			row, _ := strings.CutSuffix(strings.Split(corpus, "\n")[q], "\n")
			if len(hits) != 2 || string(hits[0].Row) != row || math.Abs(float64(hits[0].Score)-1) > 1e-3 {
				t.Errorf("%s: query %d: %d hits, first %s score %v; want its own row %s, score 1", want, q, len(hits), hits[0].Row, hits[0].Score, row)
			}
		}
		if rows, err := r.Access([]string{"https://example.org/1"}); err != nil || rows[0] == nil || !strings.Contains(string(rows[0]), texts[1]) {
			t.Errorf("Access = %q", rows)
		}
		r.Close()
	}

	// A compact form of the flat file is served from its codes, re-scored exactly from the file.
	form := filepath.Join(dir, "form")
	if _, err := compact.Convert(compact.Config{From: indexPath, Out: form, Factory: "SQ8"}); err != nil {
		t.Fatal(err)
	}
	r, err := engine.Open(enginetest.Options(engine.Options{Index: form, Corpus: corpusPath, Model: model, QueryPrefix: ptr("")}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Retrieve(context.Background(), texts, 2)
	if r.IndexBackend() != engine.BackendCompact || err != nil {
		t.Fatalf("compact form: backend %q, %v", r.IndexBackend(), err)
	}
	for q, hits := range got {
		row, _ := strings.CutSuffix(strings.Split(corpus, "\n")[q], "\n")
		if len(hits) != 2 || string(hits[0].Row) != row || math.Abs(float64(hits[0].Score)-1) > 1e-6 {
			t.Errorf("compact: query %d: %d hits, first %s score %v; want its own row %s, score 1", q, len(hits), hits[0].Row, hits[0].Score, row)
		}
	}
	r.Close()

	short := filepath.Join(dir, "short.jsonl")
	os.WriteFile(short, []byte(strings.SplitAfter(corpus, "\n")[0]), 0o644)
	for _, tc := range []struct {
		opts        engine.Options
		field, want string // the option an *option.Error names ("": none), a part of the message
	}{
		{engine.Options{Index: indexPath, Corpus: short, Model: model}, "", "corpus has 1 rows but the index has 3 vectors"},
		{engine.Options{Index: corpusPath, Corpus: corpusPath, Model: model}, "Index", "Index: "},
		{engine.Options{Index: indexPath, Corpus: corpusPath, Model: dir}, "Model", "Model: "},
		{engine.Options{Index: indexPath, Corpus: filepath.Join(dir, "none.jsonl"), Model: model}, "Corpus", "Corpus: "},
		{engine.Options{Index: indexPath, Corpus: corpusPath, Model: model, Backend: "qdrant"}, "Index", `Index: unknown index backend "qdrant"`},
	} {
		var oe *option.Error
		_, err := engine.Open(enginetest.Options(tc.opts))
		if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.field != "" && (!errors.As(err, &oe) || oe.Field != tc.field)) {
			t.Errorf("Open(%+v): %v, want an error of option %q mentioning %q", tc.opts, err, tc.field, tc.want)
		}
	}
}

// --gpu on a machine without a GPU: Open serves the CPU index and encodes queries on the CPU
// after a line for each saying why;
// --gpu=require fails with that reason; a non-flat index is named as the reason.
func TestOpenWithoutGPUFallsBackToCPU(t *testing.T) {
	cudatest.WithoutDevice(t)
	texts := passages
	model, dir, _, vecs := realParts(t, texts)
	corpusPath, flatPath, hnswPath := filepath.Join(dir, "corpus.jsonl"), filepath.Join(dir, "flat.index"), filepath.Join(dir, "hnsw.index")
	dim := len(vecs) / len(texts)
	hnsw, err := faissgo.New(dim, "HNSW8", faissgo.IP)
	if err != nil {
		t.Fatal(err)
	}
	if err := hnsw.Add(vecs); err != nil || hnsw.WriteFile(hnswPath) != nil {
		t.Fatal(err)
	}
	hnsw.Close()

	for _, tc := range []struct{ index, why string }{{flatPath, "no CUDA device"}, {hnswPath, "IndexHNSWFlat is not a flat index"}} {
		var log strings.Builder
		opts := engine.Options{Index: tc.index, Corpus: corpusPath, Model: model, QueryPrefix: ptr(""), GPU: engine.GPUAuto, Log: &log}
		r, err := engine.Open(enginetest.Options(opts))
		if err != nil {
			t.Fatalf("%s, --gpu: %v", tc.index, err)
		}
		hits, err := r.Retrieve(context.Background(), texts[1:2], 1)
		if err != nil || len(hits[0]) != 1 || !strings.Contains(string(hits[0][0].Row), texts[1]) {
			t.Errorf("%s, --gpu: the CPU index answered %v, %v", tc.index, hits, err)
		}
		r.Close() // the hits' rows are views into the corpus: checked before this
		// One line for the index, one for the query encoder (in either order: they load in parallel).
		lines := strings.Split(strings.TrimSpace(log.String()), "\n")
		slices.Sort(lines)
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "needle: not using a GPU, encoding on the CPU: ") || !strings.Contains(lines[0], "no CUDA device") ||
			!strings.HasPrefix(lines[1], "needle: not using a GPU, serving on the CPU: ") || !strings.Contains(lines[1], tc.why) {
			t.Errorf("%s, --gpu: log %q, want a line for the encoder (no CUDA device) and one for the index (%q)", tc.index, log.String(), tc.why)
		}
		opts.GPU = engine.GPURequire
		if _, err := engine.Open(enginetest.Options(opts)); err == nil || !strings.Contains(err.Error(), "GPU index required: ") || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s, --gpu=require: %v, want an error saying %q", tc.index, err, tc.why)
		}
	}
}
