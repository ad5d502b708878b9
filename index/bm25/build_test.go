package bm25

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunsAndResumeGiveTheSameIndex: a build that wrote many runs (a tiny memory budget),
// and one interrupted after a checkpoint and rerun, write byte for byte the files of a
// build in one run.
func TestRunsAndResumeGiveTheSameIndex(t *testing.T) {
	const corpus = "testdata/corpus.jsonl"
	one := filepath.Join(t.TempDir(), "one")
	if err := Build(BuildConfig{Corpus: corpus, Out: one}); err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(t.TempDir(), "runs")
	if err := Build(BuildConfig{Corpus: corpus, Out: runs, MemoryBytes: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, one, runs)

	// Interrupted: the first 1,000 lines indexed and checkpointed, then a rerun.
	resumed := filepath.Join(t.TempDir(), "resumed")
	f, err := os.Open(corpus)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, _ := f.Stat()
	abs, _ := filepath.Abs(corpus)
	b, err := resume(BuildConfig{Corpus: corpus, Out: resumed, MemoryBytes: 1 << 20, Threads: 2},
		Corpus{Path: abs, Size: info.Size(), Mtime: info.ModTime().UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(f)
	var head bytes.Buffer
	for range 1000 {
		line, _ := br.ReadBytes('\n')
		head.Write(line)
	}
	if err := b.index(&head); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*os.File{b.norms, b.ids, b.idOff} {
		f.Close()
	}
	if IsIndex(resumed) {
		t.Fatal("an interrupted build left an index")
	}
	var log bytes.Buffer
	if err := Build(BuildConfig{Corpus: corpus, Out: resumed, Log: &log}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(log.Bytes(), []byte("resuming the BM25 build at row 1000")) {
		t.Errorf("the rerun did not resume: %s", log.Bytes())
	}
	sameFiles(t, one, resumed)
}

func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	for _, name := range []string{dictName, termsName, postingsName, normsName, idsName, idOffName} {
		x, err1 := os.ReadFile(filepath.Join(a, name))
		y, err2 := os.ReadFile(filepath.Join(b, name))
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs between %s and %s (%v, %v)", name, a, b, err1, err2)
		}
	}
	ma, _ := ReadMeta(a)
	mb, _ := ReadMeta(b)
	if ma == nil || mb == nil || ma.Corpus.Hash != mb.Corpus.Hash || ma.DocCount != mb.DocCount || ma.Terms != mb.Terms {
		t.Errorf("metas differ: %+v vs %+v", ma, mb)
	}
	if _, err := os.Stat(filepath.Join(b, partialName)); err == nil {
		t.Errorf("%s: the partial folder is left", b)
	}
}

// TestLinesLongerThanTheReadBuffer: a corpus row of 3 MB (past the reader's 1 MiB buffer)
// between short ones, and a last line without a newline, keep their rows and terms.
func TestLinesLongerThanTheReadBuffer(t *testing.T) {
	dir := t.TempDir()
	corpus := filepath.Join(dir, "corpus.jsonl")
	long := strings.Repeat("needle ", 3<<20/7)
	text := `{"id": "a", "contents": "first row"}` + "\n" + `{"id": "b", "contents": "` + long + `"}` + "\n" +
		`{"id": "c", "contents": "last row needle"}`
	if err := os.WriteFile(corpus, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	x := buildAndOpen(t, corpus, filepath.Join(dir, "ix"))
	dist, labels := make([]float32, 3), make([]int64, 3)
	if err := x.Search(context.Background(), []string{"needle"}, 3, dist, labels); err != nil {
		t.Fatal(err)
	}
	if x.Ntotal() != 3 || min(labels[0], labels[1]) != 1 || max(labels[0], labels[1]) != 2 || labels[2] != -1 {
		t.Fatalf("%d rows; hits of \"needle\": rows %v, want 1 (3 MB of it) and 2", x.Ntotal(), labels)
	}
}

// buildAndOpen builds corpus into out and opens it; closed when the test ends.
func buildAndOpen(t testing.TB, corpus, out string) *Index {
	t.Helper()
	if err := Build(BuildConfig{Corpus: corpus, Out: out}); err != nil {
		t.Fatal(err)
	}
	x, err := Open(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}
