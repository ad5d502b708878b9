package indexdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"needle/internal/jsonfile"
	"needle/internal/option"
)

// ManifestName is the file `needle build` writes last into its output folder; its presence
// means the folder is complete.
const ManifestName = "manifest.json"

// IndexFileName and EmbeddingsFileName are the index and the embeddings `needle build` writes
// into its output folder.
const (
	IndexFileName      = "index.faiss"
	EmbeddingsFileName = "emb.memmap"
)

// Manifest describes a finished `needle build` output folder: everything `needle serve --index
// DIR` needs besides the model weights. File names are relative to the folder; the corpus and
// the model are recorded relative to it when they lie inside it (so they travel with a copy of
// the folder), else absolute (jsonfile.LocalPath); ReadManifest resolves them to absolute paths.
type Manifest struct {
	Model          string     `json:"model"`           // model folder the passages were encoded with ("" for --embeddings)
	Dimension      int        `json:"dimension"`       // embedding width
	Count          int64      `json:"count"`           // index rows = corpus lines
	Factory        string     `json:"factory"`         // FAISS index_factory string, e.g. "Flat", "HNSW32"
	Metric         string     `json:"metric"`          // "ip" or "l2"
	Prefix         string     `json:"prefix"`          // prepended to each passage before encoding
	MaxLength      int        `json:"max_length"`      // tokens per passage, specials included
	Pooling        string     `json:"pooling"`         // "mean" or "cls"
	Normalize      bool       `json:"normalize"`       // embeddings L2-normalized
	IndexFile      string     `json:"index_file"`      // "index.faiss"
	EmbeddingsFile string     `json:"embeddings_file"` // "emb.memmap" (headerless float32 Count x Dimension) or ""
	Corpus         CorpusInfo `json:"corpus"`
	BadRows        []BadRow   `json:"bad_rows"`  // corpus lines indexed as empty text
	ArgsHash       string     `json:"args_hash"` // hash of the build arguments (see Args.Hash)
	NeedleVersion  string     `json:"needle_version"`
	TrainSize      int        `json:"train_size,omitempty"` // training sample size of IVF/PQ/SQ factories
	Seed           int64      `json:"seed,omitempty"`       // training sample seed
	// Precision of the encoder's Linear layers: "fp16", "int8" or "bf16"; "" for --embeddings builds
	// and for builds from before the field (which encoded at fp16).
	Precision string `json:"precision,omitempty"`
}

// CorpusInfo identifies the corpus file an index was built from.
type CorpusInfo struct {
	Path  string `json:"path"`  // inside the index folder: relative to it; else absolute
	Size  int64  `json:"size"`  // bytes
	Mtime int64  `json:"mtime"` // modification time, Unix nanoseconds
	Hash  string `json:"hash"`  // "xxh64:<hex>" of the whole file ("sha256:<hex>" in builds before it)
}

// BadRow is a corpus line that is not a JSON object with a string "contents"; it keeps its
// row and is encoded as empty text.
type BadRow struct {
	Line   int64  `json:"line"` // 1-based line number (row = Line-1)
	Reason string `json:"reason"`
}

// ReadManifest reads DIR/manifest.json and checks the fields serve relies on.
func ReadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestName)
	var m Manifest
	if err := jsonfile.Read(path, &m, m.validate); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: no manifest (not a complete `needle build` output folder)", path)
		}
		return nil, err
	}
	m.Corpus.Path, m.Model = jsonfile.ResolvePath(dir, m.Corpus.Path), jsonfile.ResolvePath(dir, m.Model)
	return &m, nil
}

func (m *Manifest) validate() error {
	switch {
	case m.Dimension <= 0:
		return fmt.Errorf("field dimension: %d, want > 0", m.Dimension)
	case m.Count < 0:
		return fmt.Errorf("field count: %d, want >= 0", m.Count)
	case m.Metric != "ip" && m.Metric != "l2":
		return fmt.Errorf("field metric: %q, want \"ip\" or \"l2\"", m.Metric)
	case m.Factory == "":
		return errors.New("field factory: empty")
	case !jsonfile.LocalName(m.IndexFile):
		return fmt.Errorf("field index_file: %q, want a file name inside the folder", m.IndexFile)
	case m.EmbeddingsFile != "" && !jsonfile.LocalName(m.EmbeddingsFile):
		return fmt.Errorf("field embeddings_file: %q, want a file name inside the folder", m.EmbeddingsFile)
	case m.Pooling != "" && m.Pooling != "mean" && m.Pooling != "cls":
		return fmt.Errorf("field pooling: %q, want \"mean\" or \"cls\"", m.Pooling)
	case m.Precision != "" && m.Precision != "fp16" && m.Precision != "int8" && m.Precision != "bf16":
		return fmt.Errorf("field precision: %q, want \"fp16\", \"int8\" or \"bf16\"", m.Precision)
	}
	for i, b := range m.BadRows {
		if b.Line < 1 || b.Line > m.Count {
			return fmt.Errorf("field bad_rows[%d].line: %d, want 1..%d", i, b.Line, m.Count)
		}
	}
	return nil
}

// QueryPrecision is the precision serve encodes queries at, given --precision asked ("" =
// the build's). Queries encoded at another precision than the passages drift from them
// (int8 vs fp16: cosine down to 0.996 on MiniLM), so a mismatch is an error unless force;
// a build from embeddings names no precision and takes any (fp16 by default).
func (m *Manifest) QueryPrecision(asked string, force bool) (string, error) {
	built := m.Precision
	if built == "" && m.Model != "" {
		built = "fp16" // builds from before the field
	}
	switch {
	case asked == "":
		if built == "" {
			return "fp16", nil
		}
		return built, nil
	case built == "" || asked == built || force:
		return asked, nil
	}
	return "", option.Wrap("Precision", option.Fixf("ForcePrecision", "serves it anyway",
		"%s: the index was built with %s passage embeddings, and queries encoded at another precision drift from them; leave it out, or rebuild at %s",
		asked, built, asked))
}

// IndexFile is the index file of path: path itself when it is a file, else the index file the
// manifest of the `needle build` folder path names.
func IndexFile(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return path, err
	}
	m, err := ReadManifest(path)
	if err != nil {
		return "", err
	}
	return filepath.Join(path, m.IndexFile), nil
}

// WriteManifest writes m as DIR/manifest.json atomically (temp + fsync + rename), with the
// corpus and model paths as jsonfile.LocalPath records them.
func WriteManifest(dir string, m *Manifest) error {
	local := *m
	local.Corpus.Path, local.Model = jsonfile.LocalPath(dir, m.Corpus.Path), jsonfile.LocalPath(dir, m.Model)
	return jsonfile.Write(filepath.Join(dir, ManifestName), &local, local.validate)
}
