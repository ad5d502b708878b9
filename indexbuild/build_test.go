package indexbuild

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"needle/index/indexdir"

	"needle/faissgo"
	"needle/internal/atomicfile"
	"needle/internal/option"
)

// fakeCorpus rows are "passage i"; rows in bad are bad lines.
type fakeCorpus struct {
	n   int64
	bad map[int64]string
}

func (c *fakeCorpus) Len() int64 { return c.n }
func (c *fakeCorpus) Passage(i int64) (string, string, error) {
	if r, ok := c.bad[i]; ok {
		return "", r, nil
	}
	return fmt.Sprintf("passage %d", i), "", nil
}

// fakeEncoder maps each prefixed text to a deterministic vector; failAfter > 0 makes the
// call after that many calls fail (an interrupted build).
type fakeEncoder struct {
	dim       int
	calls     int
	failAfter int
	texts     int
}

func (e *fakeEncoder) Dim() int { return e.dim }
func (e *fakeEncoder) Encode(texts []string, prefix string) ([]float32, error) {
	e.calls++
	if e.failAfter > 0 && e.calls > e.failAfter {
		return nil, errors.New("killed")
	}
	e.texts += len(texts)
	out := make([]float32, 0, len(texts)*e.dim)
	for _, t := range texts {
		h := fnv.New64a()
		h.Write([]byte(prefix + t))
		seed := h.Sum64()
		for j := 0; j < e.dim; j++ {
			seed = seed*6364136223846793005 + 1442695040888963407
			out = append(out, float32(seed>>40)/float32(1<<24))
		}
	}
	return out, nil
}

// fakeIndex keeps the added rows and writes them as its file; needTrain makes it an
// IVF-like index that must be trained first.
type fakeIndex struct {
	dim       int
	needTrain bool
	trained   []float32
	rows      []float32
	failWrite bool
}

func (x *fakeIndex) IsTrained() bool { return !x.needTrain || x.trained != nil }
func (x *fakeIndex) Train(v []float32) error {
	x.trained = slices.Clone(v)
	return nil
}
func (x *fakeIndex) Add(v []float32) error {
	if !x.IsTrained() {
		return errors.New("not trained")
	}
	x.rows = append(x.rows, v...)
	return nil
}
func (x *fakeIndex) Ntotal() int64 { return int64(len(x.rows) / x.dim) }
func (x *fakeIndex) WriteFile(path string) error {
	if x.failWrite {
		return errors.New("no space left on device")
	}
	b := make([]byte, 4*len(x.rows))
	putFloats(b, x.rows)
	return atomicfile.Write(path, b)
}
func (x *fakeIndex) Close() {}

type fixture struct {
	cfg    Config
	corpus *fakeCorpus
	enc    *fakeEncoder
	index  *fakeIndex
}

// newFixture writes a corpus file (its bytes only identify it; fakeCorpus gives the rows)
// and a model folder, and returns a config building into a fresh folder.
func newFixture(t *testing.T, rows int64) *fixture {
	dir := t.TempDir()
	corpus := filepath.Join(dir, "corpus.jsonl")
	os.WriteFile(corpus, []byte(strings.Repeat("{}\n", int(rows))), 0o644)
	model := filepath.Join(dir, "model")
	os.Mkdir(model, 0o755)
	os.WriteFile(filepath.Join(model, "model.safetensors"), []byte("weights"), 0o644)
	return &fixture{
		cfg: Config{
			Corpus: corpus, Out: filepath.Join(dir, "out"), Model: model, Prefix: "passage: ",
			MaxLength: 256, Pooling: "mean", Normalize: true, Factory: "Flat", Metric: "ip",
			ShardRows: 10, EncodeRows: 4, Version: "test",
		},
		corpus: &fakeCorpus{n: rows, bad: map[int64]string{3: "not JSON", 17: "no contents"}},
		enc:    &fakeEncoder{dim: 3},
	}
}

func (f *fixture) run() (*Report, error) {
	f.index = nil
	return Run(f.cfg, Parts{Corpus: f.corpus, Encoder: f.enc, NewIndex: func(dim int) (Index, error) {
		f.index = &fakeIndex{dim: dim, needTrain: f.cfg.Factory != "Flat"}
		return f.index, nil
	}})
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBuildAndUpToDate(t *testing.T) {
	f := newFixture(t, 25)
	f.cfg.SaveEmbeddings = true
	rep, err := f.run()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rows != 25 || rep.Encoded != 25 || rep.BadRows != 2 || rep.IndexBytes != faissgo.FlatHeaderBytes+25*3*4 {
		t.Fatalf("report %+v", rep)
	}
	m, err := indexdir.ReadManifest(f.cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	if m.Count != 25 || m.Dimension != 3 || len(m.BadRows) != 2 || m.BadRows[1] != (indexdir.BadRow{Line: 18, Reason: "no contents"}) ||
		!strings.HasPrefix(m.Corpus.Hash, hashXXH64) || m.EmbeddingsFile != indexdir.EmbeddingsFileName {
		t.Fatalf("manifest %+v", m)
	}
	// Bad rows keep their row and are encoded as empty text: row 3 is the vector of "".
	emb := readFile(t, filepath.Join(f.cfg.Out, indexdir.EmbeddingsFileName))
	want, _ := f.enc.Encode([]string{""}, "passage: ")
	wantRaw := make([]byte, 12)
	putFloats(wantRaw, want)
	if !bytes.Equal(emb[3*12:4*12], wantRaw) {
		t.Fatalf("row 3 = %v, want the empty text's vector %v", emb[36:48], wantRaw)
	}
	if index := readFile(t, filepath.Join(f.cfg.Out, indexdir.IndexFileName)); !bytes.Equal(emb, index[faissgo.FlatHeaderBytes:]) {
		t.Fatal("emb.memmap differs from the vectors of the Flat index")
	}
	if _, err := os.Stat(filepath.Join(f.cfg.Out, partialDirName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("partial folder left after a finished build: %v", err)
	}
	// The same arguments again: nothing is encoded or written.
	calls := f.enc.calls
	rep, err = f.run()
	if err != nil || !rep.UpToDate || f.enc.calls != calls || f.index != nil {
		t.Fatalf("rerun: report %+v err %v, encoder calls %d -> %d", rep, err, calls, f.enc.calls)
	}
	if m, err := UpToDate(f.cfg); m == nil || err != nil {
		t.Fatalf("UpToDate = %v, %v", m, err)
	}
	// Other arguments on a finished folder: refused, then replaced with Restart.
	f.cfg.Factory = "IVF4,Flat"
	if _, err := f.run(); !option.FixedBy(err, "Restart") {
		t.Fatalf("other factory on a finished folder: err %v", err)
	}
	f.cfg.Restart = true
	if _, err := f.run(); err != nil {
		t.Fatal(err)
	}
	if len(f.index.trained) != 25*3 {
		t.Fatalf("IVF trained on %d floats, want all 25 rows", len(f.index.trained))
	}
}

// A corpus rewritten with the same bytes (new mtime) is recognized by its hash: the
// manifest is refreshed, nothing is encoded, and the next check is the fast path again.
func TestTouchedCorpusIsUpToDate(t *testing.T) {
	f := newFixture(t, 12)
	if _, err := f.run(); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(f.cfg.Corpus, later, later); err != nil {
		t.Fatal(err)
	}
	if m, _ := UpToDate(f.cfg); m != nil {
		t.Fatal("UpToDate ignored a new corpus mtime")
	}
	calls := f.enc.calls
	rep, err := f.run()
	if err != nil || !rep.UpToDate || f.enc.calls != calls {
		t.Fatalf("touched corpus: report %+v err %v, encoder calls %d -> %d", rep, err, calls, f.enc.calls)
	}
	if m, _ := UpToDate(f.cfg); m == nil || m.Corpus.Mtime != later.UnixNano() {
		t.Fatalf("manifest not refreshed: %+v", m)
	}
}

// A corpus rewritten in place with other bytes of the same size, its mtime put back, is
// not up to date: the check hashes the bytes.
func TestCorpusRewrittenInPlaceIsNotUpToDate(t *testing.T) {
	f := newFixture(t, 12)
	if _, err := f.run(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(f.cfg.Corpus)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.cfg.Corpus, []byte(strings.Repeat("[]\n", 12)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(f.cfg.Corpus, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if m, err := UpToDate(f.cfg); m != nil || err != nil {
		t.Fatalf("UpToDate = %v, %v for a corpus of other bytes with the same size and mtime", m, err)
	}
	if _, err := f.run(); !option.FixedBy(err, "Restart") {
		t.Fatalf("rerun on a changed corpus: %v, want the refusal that Restart fixes", err)
	}
}

// Manifests of older builds: a sha256 corpus hash is checked by re-hashing with sha256
// (up to date, and the manifest moves to xxh64); a manifest without a hash is not up to date.
func TestOlderManifestHashes(t *testing.T) {
	f := newFixture(t, 12)
	if _, err := f.run(); err != nil {
		t.Fatal(err)
	}
	m, err := indexdir.ReadManifest(f.cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(readFile(t, f.cfg.Corpus))
	m.Corpus.Hash = hashSHA256 + hex.EncodeToString(sum[:])
	if err := indexdir.WriteManifest(f.cfg.Out, m); err != nil {
		t.Fatal(err)
	}
	if m, err := UpToDate(f.cfg); m == nil || err != nil {
		t.Fatalf("UpToDate = %v, %v with a matching sha256 hash", m, err)
	}
	calls := f.enc.calls
	if rep, err := f.run(); err != nil || !rep.UpToDate || f.enc.calls != calls {
		t.Fatalf("rerun with a sha256 manifest: %+v, %v, encoder calls %d -> %d", rep, err, calls, f.enc.calls)
	}
	if m, _ := indexdir.ReadManifest(f.cfg.Out); !strings.HasPrefix(m.Corpus.Hash, hashXXH64) {
		t.Errorf("manifest hash %q, want it moved to xxh64", m.Corpus.Hash)
	}
	m.Corpus.Hash = ""
	if err := indexdir.WriteManifest(f.cfg.Out, m); err != nil {
		t.Fatal(err)
	}
	if m, err := UpToDate(f.cfg); m != nil || err != nil {
		t.Fatalf("UpToDate = %v, %v for a manifest without a corpus hash", m, err)
	}
}

// Temp files of a build killed while writing (atomicfile's ".NAME.tmpDIGITS") are removed
// by the next run.
func TestTempFilesOfAKilledBuildAreRemoved(t *testing.T) {
	f := newFixture(t, 25)
	partial := filepath.Join(f.cfg.Out, partialDirName)
	if err := os.MkdirAll(partial, 0o755); err != nil {
		t.Fatal(err)
	}
	temps := []string{filepath.Join(f.cfg.Out, ".index.faiss.tmp123456"), filepath.Join(partial, ".shard-00000001.bin.tmp42")}
	for _, p := range temps {
		if err := os.WriteFile(p, []byte("half written"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var log strings.Builder
	f.cfg.Log = &log
	if _, err := f.run(); err != nil {
		t.Fatal(err)
	}
	for _, p := range temps {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind (%v)", p, err)
		}
	}
	if !strings.Contains(log.String(), "removed 1 temp files left by an interrupted build") {
		t.Errorf("log does not report the removal:\n%s", log.String())
	}
}

// An interrupted build resumes after its last finished shard and produces the same bytes.
func TestResumeIsIdentical(t *testing.T) {
	whole := newFixture(t, 25)
	if _, err := whole.run(); err != nil {
		t.Fatal(err)
	}
	want := readFile(t, filepath.Join(whole.cfg.Out, indexdir.IndexFileName))

	f := newFixture(t, 25)
	f.enc.failAfter = 4 // shard 0 = 3 calls of 4,4,2 rows; dies inside shard 1
	if _, err := f.run(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("interrupted run: err %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.cfg.Out, indexdir.IndexFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("an interrupted build left an index file")
	}
	if _, err := os.Stat(filepath.Join(f.cfg.Out, indexdir.ManifestName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("an interrupted build left a manifest")
	}
	f.enc.failAfter = 0
	rep, err := f.run()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Encoded != 15 || rep.BadRows != 2 {
		t.Fatalf("resumed run encoded %d rows with %d bad, want 15 (rows 10..24) and 2", rep.Encoded, rep.BadRows)
	}
	if got := readFile(t, filepath.Join(f.cfg.Out, indexdir.IndexFileName)); !bytes.Equal(got, want) {
		t.Fatal("resumed index differs from an uninterrupted build")
	}
}

// A partial build of other arguments or another corpus is refused with the differing
// field named; Restart discards it.
func TestResumeRefusesChangedArguments(t *testing.T) {
	f := newFixture(t, 25)
	f.enc.failAfter = 4
	f.run()
	f.enc.failAfter = 0
	f.cfg.Prefix = ""
	_, err := f.run()
	if err == nil || !strings.Contains(err.Error(), `prefix: "passage: " -> ""`) || !option.FixedBy(err, "Restart") {
		t.Fatalf("changed prefix: err %v", err)
	}
	f.cfg.Prefix = "passage: "
	os.WriteFile(f.cfg.Corpus, []byte(strings.Repeat("[]\n", 25)), 0o644)
	if _, err := f.run(); err == nil || !strings.Contains(err.Error(), "corpus_hash") {
		t.Fatalf("changed corpus: err %v", err)
	}
	f.cfg.Restart = true
	rep, err := f.run()
	if err != nil || rep.Encoded != 25 {
		t.Fatalf("restart: report %+v err %v", rep, err)
	}
}

// A damaged shard is encoded again rather than trusted.
func TestDamagedShardIsReencoded(t *testing.T) {
	f := newFixture(t, 25)
	f.enc.failAfter = 7 // shards 0 and 1 finished
	f.run()
	path := shardPath(filepath.Join(f.cfg.Out, partialDirName), 1)
	b := readFile(t, path)
	b[shardHeader+5] ^= 0xff
	os.WriteFile(path, b, 0o644)
	var log bytes.Buffer
	f.cfg.Log = &log
	f.enc.failAfter = 0
	rep, err := f.run()
	if err != nil || rep.Encoded != 15 || !strings.Contains(log.String(), "checksum mismatch") {
		t.Fatalf("report %+v err %v log %q", rep, err, log.String())
	}
}

func TestOutputErrors(t *testing.T) {
	f := newFixture(t, 5)
	os.WriteFile(f.cfg.Out, []byte("a file"), 0o644)
	if _, err := f.run(); err == nil || !strings.Contains(err.Error(), "output folder") {
		t.Fatalf("--out is a file: err %v", err)
	}
	f = newFixture(t, 5)
	f.cfg.Factory = "HNSW32"
	_, err := Run(f.cfg, Parts{Corpus: f.corpus, Encoder: f.enc, NewIndex: func(dim int) (Index, error) {
		return &fakeIndex{dim: dim, failWrite: true}, nil
	}})
	if err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("index write failure: err %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.cfg.Out, indexdir.ManifestName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("manifest written although the index was not")
	}
	f.corpus.n = 0
	f.cfg.Restart = true
	if _, err := f.run(); err == nil || !strings.Contains(err.Error(), "no rows") {
		t.Fatalf("empty corpus: err %v", err)
	}
}

// --embeddings: the same vectors as a memmap or .npy give the same index, without encoding.
func TestBuildFromEmbeddings(t *testing.T) {
	f := newFixture(t, 25)
	f.cfg.SaveEmbeddings = true
	if _, err := f.run(); err != nil {
		t.Fatal(err)
	}
	memmap := filepath.Join(f.cfg.Out, indexdir.EmbeddingsFileName)
	want := readFile(t, filepath.Join(f.cfg.Out, indexdir.IndexFileName))
	npy := filepath.Join(t.TempDir(), "emb.npy")
	header := "{'descr': '<f4', 'fortran_order': False, 'shape': (25, 3), }"
	header += strings.Repeat(" ", 63-(10+len(header))%64) + "\n"
	var b bytes.Buffer
	b.WriteString("\x93NUMPY\x01\x00")
	binary.Write(&b, binary.LittleEndian, uint16(len(header)))
	b.WriteString(header)
	b.Write(readFile(t, memmap))
	os.WriteFile(npy, b.Bytes(), 0o644)

	for _, emb := range []string{memmap, npy} { // the memmap's dim comes from the manifest beside it
		g := newFixture(t, 25)
		g.cfg.Embeddings, g.cfg.Model = emb, ""
		rep, err := g.run()
		if err != nil {
			t.Fatalf("%s: %v", emb, err)
		}
		if g.enc.calls != 0 || rep.BadRows != 2 {
			t.Fatalf("%s: %d encoder calls, %d bad rows", emb, g.enc.calls, rep.BadRows)
		}
		if got := readFile(t, filepath.Join(g.cfg.Out, indexdir.IndexFileName)); !bytes.Equal(got, want) {
			t.Fatalf("%s: index differs from the encoded build", emb)
		}
	}
	g := newFixture(t, 24)
	g.cfg.Embeddings = memmap
	if _, err := g.run(); err == nil || !strings.Contains(err.Error(), "holds 25 rows") {
		t.Fatalf("row count mismatch: err %v", err)
	}
	g = newFixture(t, 25)
	g.cfg.Embeddings, g.cfg.Dim = npy, 4
	if _, err := g.run(); err == nil || !strings.Contains(err.Error(), "Dim: 4, but") {
		t.Fatalf("dim mismatch: err %v", err)
	}
}
