package bm25

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"sort"

	"needle/internal/mapfile"
)

// maxClauses is Lucene's default maximum clause count (IndexSearcher.getMaxClauseCount):
// pyserini fails a query of more distinct terms with TooManyClauses; needle keeps the
// first maxClauses distinct terms instead.
const maxClauses = 1024

// Index is a BM25 index folder memory-mapped: the dictionary, postings, lengths and ids are
// read in place, so opening is immediate and memory is the page cache's. Safe for concurrent
// searches.
type Index struct {
	meta                     *Meta
	dict, terms, post, norms []byte
	ids, idOff               []byte
	blocks, blockOff         []byte
	release                  []func()     // unmaps the files (mapfile.Map)
	normInverse              [256]float32 // Lucene's BM25 cache: 1 / (k1 ((1-b) + b len/avgdl)) per length byte
	k1, b                    float32
}

// Open maps the BM25 index in dir.
func Open(dir string) (*Index, error) {
	m, err := ReadMeta(dir)
	if err != nil {
		return nil, err
	}
	x := &Index{meta: m, k1: float32(m.K1), b: float32(m.B)}
	for _, f := range []struct {
		name string
		dst  *[]byte
		size int64 // expected size, -1: any
	}{
		{dictName, &x.dict, (m.Terms + 1) * dictEntrySize}, {termsName, &x.terms, -1}, {postingsName, &x.post, -1},
		{normsName, &x.norms, m.Rows}, {idsName, &x.ids, -1}, {idOffName, &x.idOff, 8 * (m.Rows + 1)},
		{blocksName, &x.blocks, -1}, {blockOffName, &x.blockOff, -1},
	} {
		b, release, err := mapfile.Map(filepath.Join(dir, f.name), false, false)
		if err == nil {
			x.release = append(x.release, release)
		}
		if err == nil && f.size >= 0 && int64(len(b)) != f.size {
			err = fmt.Errorf("%s: %d bytes, want %d for %d rows and %d terms (damaged?)", f.name, len(b), f.size, m.Rows, m.Terms)
		}
		if err != nil {
			x.Close()
			return nil, err
		}
		*f.dst = b
	}
	last := x.entry(m.Terms)
	if last.termOff != uint64(len(x.terms)) || last.postOff != uint64(len(x.post)) {
		x.Close()
		return nil, fmt.Errorf("%s: dictionary does not match the terms and postings files (damaged?)", dir)
	}
	x.normInverse = normInverseTable(x.k1, x.b, m.SumTotalTermFreq, m.DocCount)
	if got, want := int64(len(x.blockOff)), 8*(m.Terms+1); got != want {
		x.Close()
		return nil, fmt.Errorf("%s: %d bytes, want %d for %d terms (damaged?)", blockOffName, got, want, m.Terms)
	}
	if n := binary.LittleEndian.Uint64(x.blockOff[8*m.Terms:]); uint64(len(x.blocks)) != n*blockEntrySize {
		x.Close()
		return nil, fmt.Errorf("%s: %d bytes, want %d blocks (damaged?)", blocksName, len(x.blocks), n)
	}
	return x, nil
}

// Close unmaps the files; no search may run meanwhile or after.
func (x *Index) Close() error {
	for _, release := range x.release {
		release()
	}
	x.release = nil
	return nil
}

// Meta describes the index.
func (x *Index) Meta() *Meta { return x.meta }

// Ntotal is the number of rows.
func (x *Index) Ntotal() int64 { return x.meta.Rows }

type dictEntry struct{ termOff, postOff, df uint64 }

func (x *Index) entry(i int64) dictEntry {
	e := x.dict[i*dictEntrySize:]
	return dictEntry{binary.LittleEndian.Uint64(e), binary.LittleEndian.Uint64(e[8:]), binary.LittleEndian.Uint64(e[16:])}
}

// lookup returns term's document frequency, postings and blocks; df 0 when absent.
func (x *Index) lookup(term []byte) (df uint64, postings []byte, blocks []byte) {
	n := x.meta.Terms
	termAt := func(i int64) []byte {
		return x.terms[x.entry(i).termOff:x.entry(i+1).termOff]
	}
	i := int64(sort.Search(int(n), func(i int) bool { return bytes.Compare(termAt(int64(i)), term) >= 0 }))
	if i == n || !bytes.Equal(termAt(i), term) {
		return 0, nil, nil
	}
	e, next := x.entry(i), x.entry(i+1)
	b0, b1 := binary.LittleEndian.Uint64(x.blockOff[8*i:]), binary.LittleEndian.Uint64(x.blockOff[8*i+8:])
	return e.df, x.post[e.postOff:next.postOff], x.blocks[b0*blockEntrySize : b1*blockEntrySize]
}

// id is row's corpus id (pyserini's tie order).
func (x *Index) id(row int64) []byte {
	return x.ids[binary.LittleEndian.Uint64(x.idOff[8*row:]):binary.LittleEndian.Uint64(x.idOff[8*row+8:])]
}

// idf is Lucene's BM25 idf, computed in float64 and rounded to float32 as Lucene does.
func (x *Index) idf(df uint64) float32 {
	n := float64(x.meta.DocCount)
	return float32(math.Log(1 + (n-float64(df)+0.5)/(float64(df)+0.5)))
}
