package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"needle/engine/indexbuild"
)

// writeManifest makes dir a minimal `needle build` output folder with passage prefix prefix.
func writeManifest(t *testing.T, dir, prefix string) {
	t.Helper()
	m := &indexbuild.Manifest{Model: "/models/m", Dimension: 4, Count: 1, Factory: "Flat", Metric: "ip", Prefix: prefix,
		MaxLength: 256, Pooling: "mean", Normalize: true, IndexFile: "index.faiss",
		Corpus: indexbuild.CorpusInfo{Path: "/data/corpus.jsonl"}}
	if err := indexbuild.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
}

func TestServeFlagsAndFiles(t *testing.T) {
	e5, plain := t.TempDir(), t.TempDir()
	writeManifest(t, e5, "passage: ")
	writeManifest(t, plain, "")
	bare := filepath.Join(t.TempDir(), "e5_Flat.index")
	os.WriteFile(bare, []byte("x"), 0o644)
	for _, tc := range []struct {
		name                         string
		args                         []string
		index, corpus, model, prefix string
		err                          string
	}{
		{"manifest fills corpus and model", []string{"--index", plain}, filepath.Join(plain, "index.faiss"), "/data/corpus.jsonl", "/models/m", "", ""},
		{"e5 manifest sets query prefix", []string{"--index", e5}, filepath.Join(e5, "index.faiss"), "/data/corpus.jsonl", "/models/m", "query: ", ""},
		{"explicit empty prefix wins", []string{"--index", e5, "--query-prefix", ""}, filepath.Join(e5, "index.faiss"), "/data/corpus.jsonl", "/models/m", "", ""},
		{"anchor aliases, e5 name", []string{"--index_path", bare, "--corpus_path", "c.jsonl", "--retriever_model", "/m/e5-base-v2",
			"--retriever_name", "e5", "--faiss_gpu", "--topk", "3", "--port", "8001"}, bare, "c.jsonl", "/m/e5-base-v2", "query: ", ""},
		{"bare index needs corpus", []string{"--index", bare, "--model", "m"}, "", "", "", "", "--corpus"},
		{"bare index needs model", []string{"--index", bare, "--corpus", "c"}, "", "", "", "", "--model"},
		{"missing index", []string{"--corpus", "c"}, "", "", "", "", "--index"},
		{"index not found", []string{"--index", "/nonexistent/x"}, "", "", "", "", "no such file"},
		{"folder without manifest", []string{"--index", t.TempDir()}, "", "", "", "", "no manifest"},
		{"bad port", []string{"--index", bare, "--port", "70000"}, "", "", "", "", "--port"},
		{"stray argument", []string{"--index", bare, "extra"}, "", "", "", "", "unexpected argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseServeFlags(tc.args)
			var files servedFiles
			if err == nil {
				files, err = resolveFiles(f)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if files.indexFile != tc.index || files.corpus != tc.corpus || files.model != tc.model || files.prefix != tc.prefix {
				t.Errorf("got index %q corpus %q model %q prefix %q", files.indexFile, files.corpus, files.model, files.prefix)
			}
		})
	}
}

func TestAdvertisedIP(t *testing.T) {
	if got := advertisedIP("127.0.0.1"); got != "127.0.0.1" {
		t.Errorf("advertisedIP(127.0.0.1) = %s", got)
	}
	if got := advertisedIP("0.0.0.0"); got == "0.0.0.0" || got == "" {
		t.Errorf("advertisedIP(0.0.0.0) = %q, want a dialable address", got)
	}
}
