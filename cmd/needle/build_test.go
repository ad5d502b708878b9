package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"needle/bench"
	"needle/encoder/bert"
	"needle/faissgo"
	"needle/index/indexdir"
	"needle/testkit/testenv"
)

// buildTools runs the real needle (this test binary under the name needle: TestMain) and the
// tools/wordnet binary (built once per test process) as child processes, for the tests that kill
// them, limit their files or check what they print.
type buildTools struct {
	t               *testing.T
	needle, wordnet string
}

// toolsDir holds the needle link and the wordnet binary for every test of this process;
// TestMain removes it.
var toolsDir string

var wordnetBuild = sync.OnceValues(func() (string, error) {
	path := filepath.Join(toolsDir, "wordnet")
	if out, err := exec.Command("go", "build", "-o", path, "needle/tools/wordnet").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build needle/tools/wordnet: %v\n%s", err, out)
	}
	return path, nil
})

// TestMain runs runMain when this binary was started as needle (the link buildTools uses), else
// the tests.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "needle" {
		os.Exit(runMain(os.Args[1:]))
	}
	exe, err := os.Executable()
	if err == nil {
		toolsDir, err = os.MkdirTemp("", "needle-cmd-test")
	}
	if err == nil {
		err = os.Symlink(exe, filepath.Join(toolsDir, "needle"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cmd/needle tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(toolsDir)
	os.Exit(code)
}

func newBuildTools(t *testing.T) *buildTools {
	t.Helper()
	wordnet, err := wordnetBuild()
	if err != nil {
		t.Fatal(err)
	}
	return &buildTools{t: t, needle: filepath.Join(toolsDir, "needle"), wordnet: wordnet}
}

// wordnetSubset writes corpus.jsonl and queries.jsonl of limit synsets into a temp folder.
func (b *buildTools) wordnetSubset(limit string) string {
	b.t.Helper()
	dir := b.t.TempDir()
	if out, err := exec.Command(b.wordnet, "--dict", testenv.WordNetDir(b.t), "--out", dir, "--limit", limit).CombinedOutput(); err != nil {
		b.t.Fatalf("wordnet: %v\n%s", err, out)
	}
	return dir
}

// run runs needle with args, fails the test if it fails, and returns its output.
func (b *buildTools) run(args ...string) string {
	b.t.Helper()
	out, err := exec.Command(b.needle, args...).CombinedOutput()
	if err != nil {
		b.t.Fatalf("needle %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func readBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A build killed with SIGKILL after some shards resumes on rerun and ends with an index
// byte-identical to an uninterrupted build; the result is readable by Python faiss; a
// rerun is a no-op; --embeddings rebuilds the same index without encoding.
func TestBuildResumeAfterKill(t *testing.T) {
	model := testenv.MiniLMDir(t)
	py := testenv.Python(t)
	tools := newBuildTools(t)
	data := tools.wordnetSubset("600")
	corpus := filepath.Join(data, "corpus.jsonl")
	common := []string{"--corpus", corpus, "--model", model, "--prefix", "", "--shard-rows", "100",
		"--encode-rows", "50", "--batch-size", "16", "--threads", "2"}
	whole := filepath.Join(t.TempDir(), "whole")
	tools.run(append([]string{"build", "--out", whole, "--save-embeddings"}, common...)...)

	killed := filepath.Join(t.TempDir(), "killed")
	cmd := exec.Command(tools.needle, append([]string{"build", "--out", killed, "--save-embeddings"}, common...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	second := filepath.Join(killed, "partial", "shard-00000001.bin")
	for {
		if _, err := os.Stat(second); err == nil {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("build ended (%v) before it could be killed after 2 shards:\n%s", err, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	for _, name := range []string{indexdir.IndexFileName, indexdir.ManifestName, indexdir.EmbeddingsFileName} {
		if _, err := os.Stat(filepath.Join(killed, name)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("killed build left %s behind", name)
		}
	}
	out := tools.run(append([]string{"build", "--out", killed, "--save-embeddings"}, common...)...)
	if !strings.Contains(out, "resuming after") {
		t.Fatalf("rerun did not resume:\n%s", out)
	}
	for _, pattern := range []string{filepath.Join(killed, ".*.tmp*"), filepath.Join(killed, "partial", ".*.tmp*")} {
		if left, _ := filepath.Glob(pattern); len(left) > 0 {
			t.Fatalf("temp files left after the rerun: %v", left)
		}
	}
	want := readBytes(t, filepath.Join(whole, indexdir.IndexFileName))
	if !bytes.Equal(readBytes(t, filepath.Join(killed, indexdir.IndexFileName)), want) {
		t.Fatal("index of the killed-and-resumed build differs from the uninterrupted one")
	}
	m, err := indexdir.ReadManifest(killed)
	if err != nil || m.Count != 600 || m.Dimension != 384 || m.Pooling != "mean" {
		t.Fatalf("manifest %+v, %v", m, err)
	}

	if out := tools.run(append([]string{"build", "--out", whole, "--save-embeddings"}, common...)...); !strings.Contains(out, "up to date") {
		t.Fatalf("rerun of a finished build was not a no-op:\n%s", out)
	}

	// Python faiss reads our index; its vectors are emb.memmap and each finds itself first.
	script := `
import sys, faiss, numpy as np
idx = faiss.read_index(sys.argv[1])
emb = np.fromfile(sys.argv[2], dtype=np.float32).reshape(-1, 384)
assert idx.ntotal == 600 and idx.d == 384 and idx.metric_type == faiss.METRIC_INNER_PRODUCT, (idx.ntotal, idx.d)
assert np.array_equal(idx.reconstruct_n(0, idx.ntotal), emb)
assert np.allclose(np.linalg.norm(emb, axis=1), 1, atol=1e-4)
_, I = idx.search(emb[:50], 1)
assert (I[:, 0] == np.arange(50)).all(), I[:, 0]
for cls, path in ((faiss.IndexFlatIP, sys.argv[3]), (faiss.IndexFlatL2, sys.argv[4])):
    ref = cls(384)
    ref.add(emb)
    faiss.write_index(ref, path)
print("ok")
`
	pyDir := t.TempDir()
	refIP, refL2 := filepath.Join(pyDir, "ip.faiss"), filepath.Join(pyDir, "l2.faiss")
	pyOut, err := exec.Command(py, "-c", script, filepath.Join(whole, indexdir.IndexFileName),
		filepath.Join(whole, indexdir.EmbeddingsFileName), refIP, refL2).CombinedOutput()
	if err != nil || strings.TrimSpace(string(pyOut)) != "ok" {
		t.Fatalf("python faiss interop: %v\n%s", err, pyOut)
	}
	// needle streams Flat indexes into FAISS's format itself: byte for byte faiss.write_index.
	if !bytes.Equal(readBytes(t, refIP), want) {
		t.Fatal("our Flat IP index differs from faiss.write_index(IndexFlatIP) of the same vectors")
	}
	l2 := filepath.Join(t.TempDir(), "l2")
	tools.run("build", "--corpus", corpus, "--out", l2, "--metric", "l2", "--embeddings", filepath.Join(whole, indexdir.EmbeddingsFileName))
	if !bytes.Equal(readBytes(t, filepath.Join(l2, indexdir.IndexFileName)), readBytes(t, refL2)) {
		t.Fatal("our Flat L2 index differs from faiss.write_index(IndexFlatL2) of the same vectors")
	}

	fromEmb := filepath.Join(t.TempDir(), "from-emb")
	tools.run("build", "--corpus", corpus, "--out", fromEmb, "--embeddings", filepath.Join(whole, indexdir.EmbeddingsFileName))
	if !bytes.Equal(readBytes(t, filepath.Join(fromEmb, indexdir.IndexFileName)), want) {
		t.Fatal("--embeddings build differs from the encoded build")
	}
}

// WordNet recall with MiniLM: Flat and HNSW32 indexes built by `needle build` answer the
// example sentences of a CI-sized subset with their synset. By hand, the anchors' pipeline
// (bench/anchor_index_builder.py, torch + faiss) on the same texts gives the reference.
func TestBuildWordNetRecall(t *testing.T) {
	model := testenv.MiniLMDir(t)
	tools := newBuildTools(t)
	data := tools.wordnetSubset("1000")
	flat := filepath.Join(t.TempDir(), "flat")
	tools.run("build", "--corpus", filepath.Join(data, "corpus.jsonl"), "--model", model, "--out", flat,
		"--prefix", "", "--save-embeddings")
	hnsw := filepath.Join(t.TempDir(), "hnsw")
	tools.run("build", "--corpus", filepath.Join(data, "corpus.jsonl"), "--out", hnsw, "--factory", "HNSW32",
		"--embeddings", filepath.Join(flat, indexdir.EmbeddingsFileName))

	queries, err := bench.ReadQueries(filepath.Join(data, "queries.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := bert.Load(model, bert.Options{MaxLength: 256, BatchSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	texts := make([]string, len(queries))
	gold := make([]int64, len(queries))
	for i, q := range queries {
		texts[i], gold[i] = q.Query, q.Gold
	}
	emb, err := enc.Encode(texts, "")
	if err != nil {
		t.Fatal(err)
	}
	recall := map[string][]float64{}
	for name, dir := range map[string]string{"Flat": flat, "HNSW32": hnsw} {
		idx, err := faissgo.Read(filepath.Join(dir, indexdir.IndexFileName), false)
		if err != nil {
			t.Fatal(err)
		}
		r, err := bench.RecallAt(idx, emb, enc.Dim(), gold, []int{1, 5})
		idx.Close()
		if err != nil {
			t.Fatal(err)
		}
		recall[name] = r
		t.Logf("%s: %d queries over 1000 WordNet synsets: recall@1 %.3f, recall@5 %.3f", name, len(queries), r[0], r[1])
	}
	// Thresholds sit a few points under what the anchors' pipeline measures on this subset.
	if recall["Flat"][1] < 0.65 || recall["Flat"][0] < 0.40 {
		t.Errorf("Flat recall %v below the reference pipeline's level", recall["Flat"])
	}
	if recall["HNSW32"][1] < recall["Flat"][1]-0.02 {
		t.Errorf("HNSW32 recall@5 %.3f more than 2 points under Flat %.3f", recall["HNSW32"][1], recall["Flat"][1])
	}
}

// Bad input gives a clear error naming the problem, never a panic or a partial output.
func TestBuildCommandErrors(t *testing.T) {
	tools := newBuildTools(t)
	dir := t.TempDir()
	corpus := filepath.Join(dir, "c.jsonl")
	os.WriteFile(corpus, []byte("{\"contents\":\"a\"}\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"build", "--out", dir}, "--corpus: required"},
		{[]string{"build", "--corpus", corpus, "--out", filepath.Join(dir, "o")}, "--model: required"},
		{[]string{"build", "--corpus", corpus, "--out", filepath.Join(dir, "o"), "--model", dir, "--metric", "cos"}, "--metric"},
		{[]string{"build", "--corpus", corpus, "--out", filepath.Join(dir, "o"), "--model", dir, "--pooling", "max"}, "--pooling"},
		{[]string{"build", "--corpus", filepath.Join(dir, "missing.jsonl"), "--out", filepath.Join(dir, "o"), "--model", dir}, "missing.jsonl"},
		{[]string{"build", "--corpus", corpus, "--out", corpus, "--model", dir}, "c.jsonl"},
	} {
		out, err := exec.Command(tools.needle, c.args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) || strings.Contains(string(out), "panic") {
			t.Errorf("needle %v: err %v, output %q; want an error naming %q", c.args, err, out, c.want)
		}
	}
}

// A write that fails for lack of space (here: a file size limit, which fails writes the
// same way) ends the build with a clear error and leaves no index, manifest or temp file;
// the rerun resumes from the shards that were written.
func TestBuildDiskFull(t *testing.T) {
	model := testenv.MiniLMDir(t)
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Fatal("prlimit (util-linux) is missing")
	}
	tools := newBuildTools(t)
	data := tools.wordnetSubset("300")
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"build", "--corpus", filepath.Join(data, "corpus.jsonl"), "--model", model, "--out", out,
		"--prefix", "", "--shard-rows", "50", "--encode-rows", "50"}
	// Shards (50 x 384 floats = 77 KB) fit under 100 KB; the 460 KB index does not.
	msg, err := exec.Command(prlimit, append([]string{"--fsize=100000", tools.needle}, args...)...).CombinedOutput()
	if err == nil || !strings.Contains(strings.ToLower(string(msg)), "file too large") || !strings.Contains(string(msg), indexdir.IndexFileName) {
		t.Fatalf("build under a 100 KB file limit: err %v, output:\n%s", err, msg)
	}
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		if name := e.Name(); name == indexdir.IndexFileName || name == indexdir.ManifestName || strings.Contains(name, ".tmp") {
			t.Fatalf("failed build left %s in the output folder", name)
		}
	}
	if out := tools.run(args...); !strings.Contains(out, "resuming after 300 finished rows") {
		t.Fatalf("rerun did not reuse the written shards:\n%s", out)
	}
	if _, err := indexdir.ReadManifest(out); err != nil {
		t.Fatal(err)
	}
}
