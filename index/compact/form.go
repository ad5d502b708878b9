// Package compact makes and serves compact forms of a flat index (`needle convert`): wiki-18's
// e5_Flat.index is 21,015,324 x 768 fp32, 64.6 GB, more than this project's machines have RAM,
// and an exact scan of it from disk takes minutes per batch (index/flat). A compact form
// is a FAISS index of compressed codes (IVF-PQ by default: about 1.5 GB for wiki-18) built by
// streaming the flat file (or an embeddings memmap) once, never holding it in RAM, resumable
// after a kill from its last checkpoint with the same bytes as an uninterrupted run. At
// search time the codes give candidates and, with re-scoring, each query's candidates are
// read back from the fp32 source file (by pread, rows only) and scored exactly
// (flatscan.Rescore): the answers are exact inner products over the candidates, so recall is
// all that is approximate.
//
// A form is a folder: index.faiss (Python faiss reads it) and compact.json (Form), written
// last, whose presence means the folder is complete.
package compact

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"needle/internal/jsonfile"
)

// FormName is the file that describes a compact form folder; IndexFileName its codes.
const (
	FormName      = "compact.json"
	IndexFileName = "index.faiss"
)

// Form describes a finished compact form folder (compact.json).
type Form struct {
	Factory   string `json:"factory"` // FAISS index_factory string of index.faiss, e.g. "IVF8192,PQ64"
	IndexFile string `json:"index_file"`
	Dimension int    `json:"dimension"`
	Count     int64  `json:"count"`
	Metric    string `json:"metric"` // "ip" or "l2"
	Source    Source `json:"source"`
	// Rescore is how many candidates per query the codes give and the source re-scores
	// exactly (raised to k when smaller); 0 serves the codes' approximate scores. Its key
	// stays "rerank" so that the forms already converted (hours for wiki-18) keep theirs.
	Rescore int `json:"rerank"`
	// Nprobe is the IVF lists visited per query (0: not an IVF index, or FAISS's default).
	Nprobe        int    `json:"nprobe,omitempty"`
	TrainSize     int64  `json:"train_size"`
	Seed          int64  `json:"seed"`
	ArgsHash      string `json:"args_hash"` // of the arguments that decide index.faiss (args.hash)
	NeedleVersion string `json:"needle_version"`
}

// Source is the fp32 vectors a form was converted from: row i is Dimension little-endian
// float32s at byte Offset + 4*i*Dimension of Path. Re-scoring reads them; Size and Mtime
// say whether the file is still the one converted.
type Source struct {
	Path   string `json:"path"` // in compact.json: relative to the folder when inside it (jsonfile.LocalPath)
	Size   int64  `json:"size"`
	Mtime  int64  `json:"mtime"` // Unix nanoseconds
	Offset int64  `json:"offset"`
}

// args are the arguments that decide index.faiss's bytes: a conversion resumes only with
// the same ones, and a finished form of the same ones is up to date.
type args struct {
	Source    Source `json:"source"`
	Dimension int    `json:"dimension"`
	Count     int64  `json:"count"`
	Metric    string `json:"metric"`
	Factory   string `json:"factory"`
	TrainSize int64  `json:"train_size"`
	Seed      int64  `json:"seed"`
	ChunkRows int64  `json:"chunk_rows"` // rows per FAISS add: the same chunks give the same bytes
}

func (a args) hash() string {
	b, _ := json.Marshal(a)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// IsForm reports whether path is a compact form folder (one with compact.json).
func IsForm(path string) bool {
	_, err := os.Stat(filepath.Join(path, FormName))
	return err == nil
}

// ReadForm reads DIR/compact.json and checks the fields serving relies on.
func ReadForm(dir string) (*Form, error) {
	var f Form
	if err := jsonfile.Read(filepath.Join(dir, FormName), &f, f.validate); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: no %s (not a complete `needle convert` output folder)", dir, FormName)
		}
		return nil, err
	}
	f.Source.Path = jsonfile.ResolvePath(dir, f.Source.Path)
	return &f, nil
}

func (f *Form) validate() error {
	switch {
	case f.Dimension <= 0:
		return fmt.Errorf("field dimension: %d, want > 0", f.Dimension)
	case f.Count < 0:
		return fmt.Errorf("field count: %d, want >= 0", f.Count)
	case f.Metric != "ip" && f.Metric != "l2":
		return fmt.Errorf("field metric: %q, want \"ip\" or \"l2\"", f.Metric)
	case !jsonfile.LocalName(f.IndexFile):
		return fmt.Errorf("field index_file: %q, want a file name inside the folder", f.IndexFile)
	case f.Rescore < 0 || f.Nprobe < 0:
		return fmt.Errorf("fields rerank %d and nprobe %d: want >= 0", f.Rescore, f.Nprobe)
	case f.Rescore > 0 && (f.Source.Path == "" || f.Source.Offset < 0):
		return fmt.Errorf("field source: path %q offset %d, want a path and an offset >= 0", f.Source.Path, f.Source.Offset)
	}
	return nil
}

// writeForm writes f as DIR/compact.json atomically, the source path as jsonfile.LocalPath
// records it.
func writeForm(dir string, f *Form) error {
	local := *f
	local.Source.Path = jsonfile.LocalPath(dir, f.Source.Path)
	return jsonfile.Write(filepath.Join(dir, FormName), &local, local.validate)
}
