package indexbuild

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"needle/index/indexdir"

	"needle/internal/atomicfile"
	"needle/internal/option"
	"needle/internal/progress"
	"needle/internal/writer"
)

// Encoder turns passages into embeddings (encoder/bert.Encoder): len(texts)*Dim() floats in
// input order, prefix prepended to every text.
type Encoder interface {
	Dim() int
	Encode(texts []string, prefix string) ([]float32, error)
}

// Corpus gives the text of each row (an adapter over docstore.Corpus).
type Corpus interface {
	Len() int64
	// Passage returns row i's contents. A line that is not a valid corpus row returns
	// bad = the reason and err = nil; it is indexed as empty text. err is an I/O failure.
	Passage(i int64) (text, bad string, err error)
}

// Index is the FAISS index being built (faissgo.Index).
type Index interface {
	IsTrained() bool
	Train(x []float32) error
	Add(x []float32) error
	Ntotal() int64
	// WriteFile writes the index to path atomically (temp + fsync + rename).
	WriteFile(path string) error
	Close()
}

// Config holds the arguments of one build.
type Config struct {
	Corpus string // corpus JSONL
	Out    string // output folder
	Model  string // model folder ("" when Embeddings is set)
	// Embeddings, if set, is an existing float32 memmap or .npy to index instead of encoding;
	// Dim gives a memmap's width.
	Embeddings string
	Dim        int

	Prefix    string // prepended to each passage ("passage: " for e5)
	MaxLength int    // tokens per passage, specials included
	Pooling   string // "mean" or "cls" as asked; "" = the model's default (see Parts.Pooling)
	Normalize bool   // embeddings L2-normalized, as the encoder was loaded
	Precision string // the encoder's Linear precision ("fp16", "int8"; "" with indexdir.Embeddings)

	Factory   string // FAISS index_factory string
	Metric    string // "ip" or "l2"
	TrainSize int    // training sample of factories that need training (0 = min(rows, 100000))
	Seed      int64  // training sample seed

	ShardRows      int64 // rows per embeddings shard
	EncodeRows     int   // rows per Encoder.Encode call; progress moves per call
	SaveEmbeddings bool  // also write emb.memmap
	Restart        bool  // discard a partial or complete build of other arguments in Out
	Version        string
	Log            io.Writer // progress bars and notes (stderr); nil = discard
}

const (
	// DefaultShardRows bounds the work lost to an interruption and the memory of one shard
	// (32768 x 768 float32 = 96 MiB).
	DefaultShardRows = 32768
	defaultTrainSize = 100000
	partialDirName   = "partial"
	stateFileName    = "state.json"
)

// Report is what a build did, for the final summary.
type Report struct {
	UpToDate   bool  // Out already held this build; nothing was done
	Rows       int64 // index rows
	BadRows    int
	Encoded    int64         // rows encoded by this run (the rest came from an earlier run's shards)
	EncodeTime time.Duration // of the Encoded rows
	IndexBytes int64
	Manifest   *indexdir.Manifest
}

// complete fills what c leaves to be found: a discarding Log, the Dim of a headerless
// Embeddings file from the manifest beside it.
func (c *Config) complete() {
	c.Log = writer.OrDiscard(c.Log)
	// A headerless embeddings file written by `needle build --save-embeddings` has its
	// width in the manifest beside it.
	if c.Embeddings != "" && c.Dim == 0 && !strings.EqualFold(filepath.Ext(c.Embeddings), ".npy") {
		if m, err := indexdir.ReadManifest(filepath.Dir(c.Embeddings)); err == nil {
			c.Dim = m.Dimension
		}
	}
}

// outputState is everything that decides the output folder, cheap to compute (the corpus is
// identified by path, size and mtime): its hash is indexdir.Manifest.ArgsHash and makes a rerun of a
// finished build a no-op. The needle version is left out: a new binary reuses an index.
type outputState struct {
	CorpusPath  string `json:"corpus_path"`
	CorpusSize  int64  `json:"corpus_size"`
	CorpusMtime int64  `json:"corpus_mtime"`
	Model       string `json:"model"` // modelFingerprint, or the embeddings file's path/size/mtime
	Prefix      string `json:"prefix"`
	MaxLength   int    `json:"max_length"`
	Pooling     string `json:"pooling"`
	Normalize   bool   `json:"normalize"`
	Factory     string `json:"factory"`
	Metric      string `json:"metric"`
	TrainSize   int    `json:"train_size"`
	Seed        int64  `json:"seed"`
	SaveEmb     bool   `json:"save_embeddings"`
	Precision   string `json:"precision,omitempty"` // stateful(Config.Precision)
}

// stateful is a precision as the state hashes hold it: fp16 (the default, and what every
// build before the field encoded with) as "", so those builds keep their hashes.
func stateful(precision string) string {
	if precision == "fp16" {
		return ""
	}
	return precision
}

func (c *Config) outputState() (outputState, error) {
	abs, err := filepath.Abs(c.Corpus)
	if err != nil {
		return outputState{}, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return outputState{}, fmt.Errorf("corpus: %w", err)
	}
	var model string
	if c.Embeddings != "" {
		est, err := os.Stat(c.Embeddings)
		if err != nil {
			return outputState{}, fmt.Errorf("embeddings: %w", err)
		}
		model = fmt.Sprintf("embeddings %s %d %d dim %d", c.Embeddings, est.Size(), est.ModTime().UnixNano(), c.Dim)
	} else if model, err = modelFingerprint(c.Model); err != nil {
		return outputState{}, err
	}
	return outputState{
		CorpusPath: abs, CorpusSize: st.Size(), CorpusMtime: st.ModTime().UnixNano(), Model: model,
		Prefix: c.Prefix, MaxLength: c.MaxLength, Pooling: c.Pooling, Normalize: c.Normalize,
		Factory: c.Factory, Metric: c.Metric, TrainSize: c.TrainSize, Seed: c.Seed,
		SaveEmb: c.SaveEmbeddings, Precision: stateful(c.Precision),
	}, nil
}

func (s outputState) hash() string {
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// UpToDate returns the manifest of Out when Out already holds a complete build of these
// arguments (same corpus path, size, mtime and content hash, model files, settings), so
// the caller can skip loading the model. It returns nil, nil when a build is needed. The
// corpus is hashed (streamed, xxh64) each time: an in-place rewrite that keeps size and
// mtime is caught. A manifest without a corpus hash this binary can compute is not up to
// date; one with a sha256 hash (older builds) is checked by re-hashing with sha256.
func UpToDate(cfg Config) (*indexdir.Manifest, error) {
	cfg.complete()
	m, err := indexdir.ReadManifest(cfg.Out)
	if err != nil {
		return nil, nil
	}
	st, err := cfg.outputState()
	if err != nil {
		return nil, err
	}
	if !complete(cfg.Out, m, st.hash()) {
		return nil, nil
	}
	_, asRecorded, err := hashCorpus(cfg.Corpus, m.Corpus.Hash, cfg.Log)
	if err != nil || asRecorded == "" || asRecorded != m.Corpus.Hash {
		return nil, err
	}
	return m, nil
}

// complete reports whether m (read from dir) records a build with arguments hash argsHash
// whose index file is there.
func complete(dir string, m *indexdir.Manifest, argsHash string) bool {
	if m.ArgsHash != argsHash {
		return false
	}
	_, err := os.Stat(filepath.Join(dir, m.IndexFile))
	return err == nil
}

func upToDateReport(m *indexdir.Manifest) *Report {
	return &Report{UpToDate: true, Rows: m.Count, BadRows: len(m.BadRows), Manifest: m}
}

// Parts are the loaded components a build runs with.
type Parts struct {
	Corpus   Corpus
	Encoder  Encoder // nil when Config.Embeddings is set
	Pooling  string  // the pooling Encoder applies, for the manifest ("" = Config.Pooling)
	NewIndex func(dim int) (Index, error)
}

// Run builds cfg.Out. It resumes from the shards of an interrupted run with the same
// arguments, and writes index, embeddings and manifest (in that order, each atomically) only
// when everything is encoded; the partial folder is removed last.
func Run(cfg Config, parts Parts) (*Report, error) {
	if err := cfg.Specs().Check(); err != nil {
		return nil, err
	}
	cfg.complete()
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, fmt.Errorf("output folder: %w", err)
	}
	unlock, err := indexdir.LockDir(cfg.Out)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := removeTemps(cfg); err != nil {
		return nil, err
	}
	out, err := cfg.outputState()
	if err != nil {
		return nil, err
	}
	old, _ := indexdir.ReadManifest(cfg.Out) // nil: no finished build there
	recorded := ""
	if old != nil {
		recorded = old.Corpus.Hash
	}
	info := indexdir.CorpusInfo{Path: out.CorpusPath, Size: out.CorpusSize, Mtime: out.CorpusMtime}
	var asRecorded string
	if info.Hash, asRecorded, err = hashCorpus(cfg.Corpus, recorded, cfg.Log); err != nil {
		return nil, err
	}
	if old != nil && asRecorded != "" && asRecorded == old.Corpus.Hash && old.Corpus.Size == info.Size {
		if ok, err := refreshManifest(cfg.Out, old, out, info); err != nil || ok {
			if err != nil {
				return nil, err
			}
			return upToDateReport(old), nil
		}
	}
	if err := clearOldOutput(cfg); err != nil {
		return nil, err
	}

	rep := &Report{Rows: parts.Corpus.Len()}
	vecs, bad, closeVecs, err := embed(cfg, parts, info, out.Model, rep)
	if err != nil {
		return nil, err
	}
	defer closeVecs()

	m := &indexdir.Manifest{
		Model: cfg.Model, Dimension: vecs.Dim(), Count: rep.Rows, Factory: cfg.Factory, Metric: cfg.Metric,
		Prefix: cfg.Prefix, MaxLength: cfg.MaxLength, Pooling: cmp.Or(parts.Pooling, cfg.Pooling), Normalize: cfg.Normalize,
		IndexFile: indexdir.IndexFileName, Corpus: info, BadRows: bad, ArgsHash: out.hash(),
		NeedleVersion: cfg.Version, TrainSize: cfg.TrainSize, Seed: cfg.Seed, Precision: cfg.Precision,
	}
	if m.BadRows == nil {
		m.BadRows = []indexdir.BadRow{}
	}
	if cfg.SaveEmbeddings {
		m.EmbeddingsFile = indexdir.EmbeddingsFileName
	}
	if err := assemble(cfg, vecs, parts.NewIndex); err != nil {
		return nil, err
	}
	if err := indexdir.WriteManifest(cfg.Out, m); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(filepath.Join(cfg.Out, partialDirName)); err != nil {
		return nil, fmt.Errorf("remove finished shards: %w", err)
	}
	st, err := os.Stat(filepath.Join(cfg.Out, indexdir.IndexFileName))
	if err != nil {
		return nil, err
	}
	rep.IndexBytes, rep.BadRows, rep.Manifest = st.Size(), len(bad), m
	return rep, nil
}

// embed returns the vectors of cfg's corpus and its bad rows: the indexdir.Embeddings file (which
// must have a row per corpus line) or the encoder's output, through the resumable shards in
// Out/partial. close releases them.
func embed(cfg Config, parts Parts, info indexdir.CorpusInfo, model string, rep *Report) (vecs indexdir.Vectors, bad []indexdir.BadRow, close func(), err error) {
	if cfg.Embeddings != "" {
		e, err := indexdir.OpenEmbeddings(cfg.Embeddings, cfg.Dim)
		if err != nil {
			return nil, nil, nil, err
		}
		if e.Len() != rep.Rows {
			e.Close()
			return nil, nil, nil, fmt.Errorf("%s holds %d rows but the corpus %s has %d lines (row i must be line i)",
				cfg.Embeddings, e.Len(), cfg.Corpus, rep.Rows)
		}
		if bad, err = scanBadRows(parts.Corpus, cfg.Log); err != nil {
			e.Close()
			return nil, nil, nil, err
		}
		return e, bad, func() { e.Close() }, nil
	}
	enc := encodeState{
		CorpusSize: info.Size, CorpusHash: info.Hash, Model: model, Prefix: cfg.Prefix,
		MaxLength: cfg.MaxLength, Pooling: cfg.Pooling, Normalize: cfg.Normalize,
		Dim: parts.Encoder.Dim(), ShardRows: cfg.ShardRows, Precision: stateful(cfg.Precision),
	}
	set, bad, err := encodeShards(cfg, enc, parts, rep)
	if err != nil {
		return nil, nil, nil, err
	}
	return set, bad, func() {}, nil
}

// Embed returns the vectors of cfg's corpus for an index kept elsewhere (a Milvus
// collection; `needle build --milvus`): the indexdir.Embeddings file, or the encoder's output (Out
// then holds the resumable shards, kept after the build so a rerun encodes nothing).
// Factory, Metric and the manifest play no part. close releases the vectors.
func Embed(cfg Config, parts Parts) (vecs indexdir.Vectors, rep *Report, close func(), err error) {
	if err := cfg.Specs().Check(); err != nil {
		return nil, nil, nil, err
	}
	cfg.complete()
	unlock := func() {}
	if cfg.Embeddings == "" {
		if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
			return nil, nil, nil, fmt.Errorf("output folder: %w", err)
		}
		if unlock, err = indexdir.LockDir(cfg.Out); err != nil {
			return nil, nil, nil, err
		}
	}
	out, err := cfg.outputState()
	if err != nil {
		unlock()
		return nil, nil, nil, err
	}
	info := indexdir.CorpusInfo{Path: out.CorpusPath, Size: out.CorpusSize, Mtime: out.CorpusMtime}
	if cfg.Embeddings == "" { // the shards record the corpus's hash
		if info.Hash, _, err = hashCorpus(cfg.Corpus, "", cfg.Log); err != nil {
			unlock()
			return nil, nil, nil, err
		}
	}
	rep = &Report{Rows: parts.Corpus.Len()}
	vecs, bad, closeVecs, err := embed(cfg, parts, info, out.Model, rep)
	if err != nil {
		unlock()
		return nil, nil, nil, err
	}
	rep.BadRows = len(bad)
	return vecs, rep, func() { closeVecs(); unlock() }, nil
}

// refreshManifest handles a finished build of these arguments whose corpus has the bytes
// m records (the caller compared the hashes): up to date, ok is true and nothing is
// rebuilt. When the corpus was moved or rewritten with the same bytes (a new path or
// mtime) or m records its hash in an older format, m (read from dir) is updated in place
// and rewritten. ok is false when m records a build of other arguments.
func refreshManifest(dir string, m *indexdir.Manifest, now outputState, info indexdir.CorpusInfo) (ok bool, err error) {
	then := now
	then.CorpusPath, then.CorpusMtime = m.Corpus.Path, m.Corpus.Mtime
	if !complete(dir, m, then.hash()) {
		return false, nil
	}
	if m.Corpus == info {
		return true, nil
	}
	m.Corpus, m.ArgsHash = info, now.hash()
	return true, indexdir.WriteManifest(dir, m)
}

// removeTemps removes the temp files a killed build left in the output folder and its
// partial folder (the caller holds the folder's lock, so no live writer owns them).
func removeTemps(cfg Config) error {
	for _, dir := range []string{cfg.Out, filepath.Join(cfg.Out, partialDirName)} {
		removed, err := atomicfile.RemoveTemps(dir)
		if err != nil {
			return fmt.Errorf("remove temp files of an interrupted build: %w", err)
		}
		if len(removed) > 0 {
			fmt.Fprintf(cfg.Log, "removed %d temp files left by an interrupted build in %s\n", len(removed), dir)
		}
	}
	return nil
}

// clearOldOutput refuses (or, with Restart, removes) a complete build of other arguments in
// Out. The manifest goes first, so an interrupted removal never leaves a folder that looks
// complete.
func clearOldOutput(cfg Config) error {
	path := filepath.Join(cfg.Out, indexdir.ManifestName)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if !cfg.Restart {
		return option.Fixf("Restart", "replaces it", "%s holds a build of other arguments (corpus, model or settings differ)", cfg.Out)
	}
	for _, name := range []string{indexdir.ManifestName, indexdir.IndexFileName, indexdir.EmbeddingsFileName} {
		if err := os.Remove(filepath.Join(cfg.Out, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return atomicfile.SyncDir(cfg.Out)
}

// scanBadRows lists the bad rows of the corpus (the --embeddings path, which encodes nothing).
func scanBadRows(c Corpus, log io.Writer) ([]indexdir.BadRow, error) {
	bar := progress.Start(log, progress.Options{Label: "rows checked", Total: c.Len()})
	defer bar.Finish()
	var bad []indexdir.BadRow
	for i := int64(0); i < c.Len(); i++ {
		_, reason, err := c.Passage(i)
		if err != nil {
			return nil, err
		}
		if reason != "" {
			bad = append(bad, indexdir.BadRow{Line: i + 1, Reason: reason})
		}
		bar.Add(1)
	}
	return bad, nil
}
