package bm25

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"os"
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

// blockWriter writes bm25.blocks (every term's postings cut into blocks of blockSize, in
// dictionary order) and bm25.blockoff (terms+1 uint64: the first block of each term), one term
// at a time as the merge writes its postings.
type blockWriter struct {
	norms        []byte
	normInverse  *[256]float32
	offs, blocks *bufio.Writer
	start        uint64 // offset in bm25.postings of the next term's postings
	count        uint64 // blocks written
	terms        int64
}

func newBlockWriter(norms []byte, normInverse *[256]float32, offFile, blockFile *os.File) (*blockWriter, error) {
	if int64(len(norms)) > math.MaxUint32 {
		return nil, fmt.Errorf("%d rows: bm25.blocks holds row numbers below 2^32", len(norms))
	}
	return &blockWriter{norms: norms, normInverse: normInverse,
		offs: bufio.NewWriterSize(offFile, 1<<20), blocks: bufio.NewWriterSize(blockFile, 1<<20)}, nil
}

// term cuts the next term's postings p into blocks.
func (w *blockWriter) term(p []byte) error {
	var rec [blockEntrySize]byte
	w.offs.Write(binary.LittleEndian.AppendUint64(rec[:0], w.count))
	pos, doc := 0, int64(-1)
	for pos < len(p) {
		var best float32
		for n := 0; n < blockSize && pos < len(p); n++ {
			d, a := binary.Uvarint(p[pos:])
			f, b := binary.Uvarint(p[pos+a:])
			if a <= 0 || b <= 0 || doc+int64(d) >= int64(len(w.norms)) {
				return fmt.Errorf("bm25.postings: bad posting of term %d", w.terms)
			}
			pos, doc = pos+a+b, doc+int64(d)
			best = max(best, impact(f, w.normInverse[w.norms[doc]]))
		}
		binary.LittleEndian.PutUint64(rec[0:], w.start+uint64(pos))
		binary.LittleEndian.PutUint32(rec[8:], uint32(doc))
		binary.LittleEndian.PutUint32(rec[12:], math.Float32bits(best))
		w.blocks.Write(rec[:])
		w.count++
	}
	w.start += uint64(len(p))
	w.terms++
	return nil
}

// close ends bm25.blockoff with the block count and flushes both files.
func (w *blockWriter) close() error {
	w.offs.Write(binary.LittleEndian.AppendUint64(nil, w.count))
	if err := w.blocks.Flush(); err != nil {
		return err
	}
	return w.offs.Flush()
}

// blockPipe runs a blockWriter on a goroutine of its own: the merge hands it each term's
// postings, copied into batches of about 1 MiB, so that cutting blocks takes the second core
// while the merge runs rather than a second pass over the postings after it (at 5M rows the
// merge and that pass were a quarter of the build).
type blockPipe struct {
	full, free chan *termBatch
	cur        *termBatch
	done       chan error
}

type termBatch struct {
	buf  []byte
	ends []int // each term's end in buf
}

func startBlockPipe(w *blockWriter) *blockPipe {
	const batches = 3
	p := &blockPipe{full: make(chan *termBatch, batches), free: make(chan *termBatch, batches), done: make(chan error, 1)}
	for range batches - 1 {
		p.free <- &termBatch{}
	}
	p.cur = &termBatch{}
	go func() {
		var err error
		for bt := range p.full {
			start := 0
			for _, end := range bt.ends {
				if err == nil {
					err = w.term(bt.buf[start:end])
				}
				start = end
			}
			bt.buf, bt.ends = bt.buf[:0], bt.ends[:0]
			p.free <- bt
		}
		p.done <- cmp.Or(err, w.close())
	}()
	return p
}

// append adds a piece of the current term's postings.
func (p *blockPipe) append(piece []byte) { p.cur.buf = append(p.cur.buf, piece...) }

// endTerm ends the current term.
func (p *blockPipe) endTerm() {
	p.cur.ends = append(p.cur.ends, len(p.cur.buf))
	if len(p.cur.buf) >= 1<<20 {
		p.full <- p.cur
		p.cur = <-p.free
	}
}

// close hands over the last batch, waits for the writer and returns its first error.
func (p *blockPipe) close() error {
	if len(p.cur.ends) > 0 {
		p.full <- p.cur
	}
	close(p.full)
	return <-p.done
}
