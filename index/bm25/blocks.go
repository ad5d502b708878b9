package bm25

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"needle/internal/atomicfile"
)

// blockSize is the postings of one block of bm25.blocks: the unit that a search skips whole
// when its best possible score cannot enter the top k (Lucene 9 keeps 128 too).
const blockSize = 128

// blockEntrySize is the bytes of one block record: the end of the block in bm25.postings
// (uint64), its last row (uint32) and its impact bound (float32), little-endian.
const blockEntrySize = 16

// block is one record of bm25.blocks. maxImpact is the largest freq * normInverse[norm] of the
// block's postings, rounded to float32 as termScore rounds it: a term's score grows with it,
// so termScoreOf(weight, maxImpact) bounds the score of every posting of the block.
type block struct {
	end       uint64
	lastRow   uint32
	maxImpact float32
}

func readBlock(b []byte, i int) block {
	e := b[i*blockEntrySize:]
	return block{binary.LittleEndian.Uint64(e), binary.LittleEndian.Uint32(e[8:]), math.Float32frombits(binary.LittleEndian.Uint32(e[12:]))}
}

// normInverseTable is Lucene's BM25Similarity cache, exactly as it computes it in float32:
// 1 / (k1 ((1-b) + b len/avgdl)) per length byte.
func normInverseTable(k1, b float32, sumTotalTermFreq, docCount int64) [256]float32 {
	avgdl := float32(float64(sumTotalTermFreq) / float64(max(docCount, 1)))
	var t [256]float32
	for i := range t {
		l := float32(byteToLength(byte(i)))
		t[i] = 1 / float32(k1*float32((1-b)+float32(float32(b*l)/avgdl)))
	}
	return t
}

// impact is the part of a posting's BM25 score that depends on the document: freq times the
// inverse of its length norm, in float32.
func impact(freq uint64, normInverse float32) float32 {
	return float32(float32(freq) * normInverse)
}

// writeBlocks writes bm25.blocks (every term's postings cut into blocks of blockSize, in
// dictionary order) and bm25.blockoff (terms+1 uint64: the first block of each term) from the
// finished dictionary, postings and norms in dir. One pass over the postings, read through a
// buffer (one term's postings at a time) rather than mapped: the mapped pages of a file of
// gigabytes counted in the build's resident memory.
func writeBlocks(dir string, terms int64, normInverse *[256]float32) error {
	norms, err := os.ReadFile(filepath.Join(dir, normsName))
	if err != nil {
		return err
	}
	if int64(len(norms)) > math.MaxUint32 {
		return fmt.Errorf("%d rows: bm25.blocks holds row numbers below 2^32", len(norms))
	}
	var readers [2]*bufio.Reader
	for i, name := range []string{dictName, postingsName} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		defer f.Close()
		readers[i] = bufio.NewReaderSize(f, 1<<20)
	}
	dict, postings := readers[0], readers[1]
	var entry [dictEntrySize]byte
	postOff := func() (uint64, error) {
		if _, err := io.ReadFull(dict, entry[:]); err != nil {
			return 0, fmt.Errorf("%s: %w", dictName, noEOF(err))
		}
		return binary.LittleEndian.Uint64(entry[8:]), nil
	}
	return atomicfile.Create(filepath.Join(dir, blockOffName), func(offFile *os.File) error {
		return atomicfile.Create(filepath.Join(dir, blocksName), func(blockFile *os.File) error {
			offs, blocks := bufio.NewWriterSize(offFile, 1<<20), bufio.NewWriterSize(blockFile, 1<<20)
			var rec [blockEntrySize]byte
			var count uint64
			var p []byte
			start, err := postOff()
			if err != nil {
				return err
			}
			for t := int64(0); t <= terms; t++ {
				offs.Write(binary.LittleEndian.AppendUint64(rec[:0], count))
				if t == terms {
					break
				}
				end, err := postOff()
				if err != nil {
					return err
				}
				if end < start {
					return fmt.Errorf("%s: postings of term %d end before they start", dictName, t)
				}
				p = grow(p, int(end-start))
				if _, err := io.ReadFull(postings, p); err != nil {
					return fmt.Errorf("%s: %w", postingsName, noEOF(err))
				}
				pos, doc := 0, int64(-1)
				for pos < len(p) {
					var best float32
					for n := 0; n < blockSize && pos < len(p); n++ {
						d, a := binary.Uvarint(p[pos:])
						f, b := binary.Uvarint(p[pos+a:])
						if a <= 0 || b <= 0 || doc+int64(d) >= int64(len(norms)) {
							return fmt.Errorf("bm25.postings: bad posting of term %d", t)
						}
						pos, doc = pos+a+b, doc+int64(d)
						best = max(best, impact(f, normInverse[norms[doc]]))
					}
					binary.LittleEndian.PutUint64(rec[0:], start+uint64(pos))
					binary.LittleEndian.PutUint32(rec[8:], uint32(doc))
					binary.LittleEndian.PutUint32(rec[12:], math.Float32bits(best))
					blocks.Write(rec[:])
					count++
				}
				start = end
			}
			if err := blocks.Flush(); err != nil {
				return err
			}
			return offs.Flush()
		})
	})
}
