package engine_test

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"needle/engine"
	"needle/index/milvusindex"
	"needle/testkit/enginetest"
	"needle/testkit/milvustest"
	"needle/testkit/testvec"
)

// floats are rows of dim floats as milvusindex.Vectors.
type floats struct {
	dim  int
	data []float32
}

func (f floats) Len() int64 { return int64(len(f.data) / f.dim) }
func (f floats) Dim() int   { return f.dim }
func (f floats) Read(start int64, dst []float32) error {
	copy(dst, f.data[start*int64(f.dim):])
	return nil
}

// Open with the Milvus backend on real parts (MiniLM, a real Milvus): the same hits and
// scores as FAISS over the same vectors; a collection of another dimension, another row
// count, or none is a clear error at start; Milvus going away gives ErrUnavailable and a
// false Ready until it is back.
func TestOpenMilvus(t *testing.T) {
	texts := []string{"a needle is a thin pointed steel pin", "the cat sat on the mat", "rivers flow into the sea", "a stack of hay in a field"}
	model, dir, corpus, vecs := realParts(t, texts)
	corpusPath, indexPath, dim := filepath.Join(dir, "corpus.jsonl"), filepath.Join(dir, "flat.index"), len(vecs)/len(texts)
	srv := milvustest.Start(t)
	build := func(coll string, f floats) {
		t.Helper()
		if _, err := milvusindex.Build(milvusindex.BuildOptions{URI: srv.Addr, Collection: coll, IndexType: "FLAT"}, f); err != nil {
			t.Fatal(err)
		}
	}
	build("corpus", floats{dim, vecs})
	milvus := func(coll string) engine.Options {
		return engine.Options{Backend: engine.BackendMilvus, Milvus: milvusindex.Options{URI: srv.Addr, Collection: coll, Timeout: 3 * time.Second},
			Corpus: corpusPath, Model: model, QueryPrefix: ptr("")}
	}
	r, err := engine.Open(enginetest.Options(milvus("corpus")))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, err := engine.Open(enginetest.Options(engine.Options{Index: indexPath, Corpus: corpusPath, Model: model, QueryPrefix: ptr("")}))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	got, err := r.Retrieve(ctx, texts, 4)
	if err != nil {
		t.Fatal(err)
	}
	want, err := f.Retrieve(ctx, texts, 4)
	if err != nil {
		t.Fatal(err)
	}
	for q := range texts {
		if string(got[q][0].Row) != strings.Split(corpus, "\n")[q] {
			t.Errorf("query %d: first hit %s, want its own row", q, got[q][0].Row)
		}
		for j := range want[q] {
			if string(got[q][j].Row) != string(want[q][j].Row) || math.Abs(float64(got[q][j].Score-want[q][j].Score)) > 1e-5 {
				t.Errorf("query %d hit %d: milvus %s %v, faiss %s %v", q, j, got[q][j].Row, got[q][j].Score, want[q][j].Row, want[q][j].Score)
			}
		}
	}
	if err := r.Ready(ctx); err != nil {
		t.Fatal(err)
	}

	build("dim16", floats{16, testvec.Unit(len(texts), 16, 1)})
	build("short", floats{dim, vecs[:2*dim]})
	for coll, msg := range map[string]string{
		"dim16": "encoder dimension 384 does not match index dimension 16",
		"short": "corpus has 4 rows but the index has 2 vectors",
		"none":  `Milvus.URI: milvus at ` + srv.Addr + ` has no collection "none"`,
	} {
		if _, err := engine.Open(enginetest.Options(milvus(coll))); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("collection %s: %v, want an error mentioning %q", coll, err, msg)
		}
	}

	srv.Kill()
	if _, err := r.Retrieve(ctx, texts[:1], 2); !engine.IsUnavailable(err) {
		t.Fatalf("Retrieve with Milvus down: %v, want ErrUnavailable", err)
	}
	if err := r.Ready(ctx); !engine.IsUnavailable(err) {
		t.Fatalf("Ready with Milvus down: %v", err)
	}
	srv.Restart(t)
	for deadline := time.Now().Add(2 * time.Minute); r.Ready(ctx) != nil; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not ready 2 min after Milvus restarted: %v", r.Ready(ctx))
		}
	}
	if got, err := r.Retrieve(ctx, texts[:1], 2); err != nil || string(got[0][0].Row) != string(want[0][0].Row) {
		t.Fatalf("after the restart: %v", err)
	}
}
