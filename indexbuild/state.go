package indexbuild

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/cespare/xxhash/v2"

	"needle/internal/progress"
)

// encodeState is everything that decides the embeddings of a build: two runs with equal
// encodeStates produce the same shards, so a rerun may resume from the shards of an
// interrupted one. It is saved as partial/state.json.
type encodeState struct {
	CorpusSize int64  `json:"corpus_size"`
	CorpusHash string `json:"corpus_hash"` // of the whole file: a corpus edited in place is caught
	Model      string `json:"model"`       // fingerprint of the model folder (modelFingerprint)
	Prefix     string `json:"prefix"`
	MaxLength  int    `json:"max_length"`
	Pooling    string `json:"pooling"`
	Normalize  bool   `json:"normalize"`
	Dim        int    `json:"dimension"`
	ShardRows  int64  `json:"shard_rows"`
	Precision  string `json:"precision,omitempty"` // stateful(Config.Precision)
}

func (s encodeState) key() [32]byte {
	b, _ := json.Marshal(s)
	return sha256.Sum256(b)
}

// diff names the fields where s and old differ, as "field: old -> new".
func (s encodeState) diff(old encodeState) []string {
	var out []string
	a, b := reflect.ValueOf(old), reflect.ValueOf(s)
	for i := 0; i < a.NumField(); i++ {
		if x, y := a.Field(i).Interface(), b.Field(i).Interface(); x != y {
			name := strings.Split(a.Type().Field(i).Tag.Get("json"), ",")[0]
			out = append(out, fmt.Sprintf("%s: %q -> %q", name, fmt.Sprint(x), fmt.Sprint(y)))
		}
	}
	return out
}

// Corpus hash formats in manifests: "xxh64:<hex>" now, "sha256:<hex>" before (about 4x
// slower to stream: BenchmarkHashCorpus; still understood so that older output folders
// stay up to date).
const (
	hashXXH64  = "xxh64:"
	hashSHA256 = "sha256:"
)

// hashCorpus streams the file at path once and returns its hash as new manifests record
// it (xxh64) and, in asRecorded, its hash in the format of recorded (a manifest's hash:
// xxh64 or sha256; "" for an empty or unknown format). Progress in bytes goes to log.
func hashCorpus(path, recorded string, log io.Writer) (current, asRecorded string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", "", err
	}
	bar := progress.Start(log, progress.Options{Label: "bytes hashed of " + filepath.Base(path), Total: st.Size()})
	defer bar.Finish()
	xx := xxhash.New()
	var w io.Writer = xx
	var sha hash.Hash
	if strings.HasPrefix(recorded, hashSHA256) {
		sha = sha256.New()
		w = io.MultiWriter(xx, sha)
	}
	buf := make([]byte, 4<<20)
	for {
		n, err := f.Read(buf)
		w.Write(buf[:n])
		bar.Add(int64(n))
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", "", fmt.Errorf("read %s: %w", path, err)
		}
	}
	current = hashXXH64 + hex.EncodeToString(xx.Sum(nil))
	switch {
	case sha != nil:
		asRecorded = hashSHA256 + hex.EncodeToString(sha.Sum(nil))
	case strings.HasPrefix(recorded, hashXXH64):
		asRecorded = current
	}
	return current, asRecorded, nil
}

// modelFingerprint identifies a model folder's content cheaply: name, size and mtime of each
// regular file at its top level and in its subfolders one level down (1_Pooling/).
func modelFingerprint(dir string) (string, error) {
	var lines []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() && strings.Count(rel, string(filepath.Separator)) >= 1 {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("%s %d %d", rel, info.Size(), info.ModTime().UnixNano()))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("model folder: %w", err)
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:16]), nil
}
