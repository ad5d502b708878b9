package bm25

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"needle/internal/jsonfile"
)

// The files of a BM25 index folder (`needle build --bm25`). Row i of the index is line i of
// the corpus, as for the dense index.
const (
	MetaName     = "bm25.json"     // Meta, written last: a folder without it is not an index
	dictName     = "bm25.dict"     // per term, sorted: dictEntry (24 bytes, little-endian)
	termsName    = "bm25.terms"    // the terms' bytes, concatenated in dictionary order
	postingsName = "bm25.postings" // per term: (doc delta, freq) uvarint pairs, doc-ordered
	normsName    = "bm25.norms"    // per row: its length byte (lengthToByte of its term count)
	idsName      = "bm25.ids"      // per row: its corpus "id", concatenated (pyserini's tie order)
	idOffName    = "bm25.idoff"    // rows+1 uint64 offsets into bm25.ids
	blocksName   = "bm25.blocks"   // per term, per blockSize postings: block (16 bytes, little-endian)
	blockOffName = "bm25.blockoff" // terms+1 uint64: each term's first block in bm25.blocks
	partialName  = "bm25.partial"  // the build's runs and checkpoint while building
)

// formatVersion is Meta.Format of the files this package writes and reads. Format 2 added
// bm25.blocks, the per-block score bounds that let a search skip postings.
const formatVersion = 2

// Lucene's BM25Similarity defaults, as pyserini's LuceneSearcher uses them.
const (
	DefaultK1 = 0.9
	DefaultB  = 0.4
)

// Meta describes a finished BM25 index folder.
type Meta struct {
	Format   int     `json:"format"`
	Analyzer string  `json:"analyzer"`
	K1       float64 `json:"k1"`
	B        float64 `json:"b"`
	Corpus   Corpus  `json:"corpus"`
	Rows     int64   `json:"rows"` // corpus lines = index rows
	// DocCount and SumTotalTermFreq are Lucene's field statistics: rows with at least one
	// term, and the number of terms indexed (avgdl = SumTotalTermFreq / DocCount).
	DocCount         int64  `json:"doc_count"`
	SumTotalTermFreq int64  `json:"sum_total_term_freq"`
	Terms            int64  `json:"terms"`    // distinct terms
	BadRows          int64  `json:"bad_rows"` // lines without a JSON object with a string "contents": kept, empty
	NeedleVersion    string `json:"needle_version"`
}

// Corpus identifies the corpus file an index was built from.
type Corpus struct {
	Path  string `json:"path"` // in bm25.json: relative to the folder when inside it (jsonfile.LocalPath)
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime"` // Unix nanoseconds
	Hash  string `json:"hash"`  // "xxh64:<hex>" of the whole file
}

func (m *Meta) validate() error {
	switch {
	case m.Format != formatVersion:
		return fmt.Errorf("format %d, this needle reads format %d (build it again)", m.Format, formatVersion)
	case m.Analyzer != AnalyzerName:
		return fmt.Errorf("analyzer %q, this needle analyzes queries as %q", m.Analyzer, AnalyzerName)
	case m.Rows < 0 || m.DocCount < 0 || m.DocCount > m.Rows || m.SumTotalTermFreq < m.DocCount || m.Terms < 0:
		return errors.New("inconsistent counts")
	case m.K1 < 0 || m.B < 0 || m.B > 1:
		return fmt.Errorf("k1 %g, b %g out of range", m.K1, m.B)
	}
	return nil
}

// IsIndex reports whether dir holds a BM25 index (its bm25.json).
func IsIndex(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, MetaName))
	return err == nil
}

// ReadMeta reads and checks dir's bm25.json; the corpus path it returns is absolute.
func ReadMeta(dir string) (*Meta, error) {
	var m Meta
	if err := jsonfile.Read(filepath.Join(dir, MetaName), &m, m.validate); err != nil {
		return nil, err
	}
	m.Corpus.Path = jsonfile.ResolvePath(dir, m.Corpus.Path)
	return &m, nil
}

// writeMeta writes m as dir's bm25.json, the corpus path as jsonfile.LocalPath records it.
func writeMeta(dir string, m *Meta) error {
	local := *m
	local.Corpus.Path = jsonfile.LocalPath(dir, m.Corpus.Path)
	return jsonfile.Write(filepath.Join(dir, MetaName), &local, local.validate)
}
