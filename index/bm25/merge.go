package bm25

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// dictEntrySize is the bytes of one bm25.dict entry: the term's offset in bm25.terms, its
// postings' offset in bm25.postings and its document frequency, uint64 little-endian each.
// The dictionary ends with one more entry holding the two files' sizes, so that entry i+1
// bounds term i.
const dictEntrySize = 24

// runReader reads one run's records in term order.
type runReader struct {
	r        *bufio.Reader
	f        *os.File
	seq      int // run number: postings of equal terms join in run order
	term     []byte
	df, last uint64
	post     []byte
}

// next reads the next record; io.EOF after the last.
func (rr *runReader) next() error {
	n, err := binary.ReadUvarint(rr.r)
	if err != nil {
		return err // io.EOF at a record boundary
	}
	rr.term = grow(rr.term, int(n))
	if _, err := io.ReadFull(rr.r, rr.term); err != nil {
		return err
	}
	if rr.df, err = binary.ReadUvarint(rr.r); err != nil {
		return err
	}
	if rr.last, err = binary.ReadUvarint(rr.r); err != nil {
		return err
	}
	if n, err = binary.ReadUvarint(rr.r); err != nil {
		return err
	}
	rr.post = grow(rr.post, int(n))
	_, err = io.ReadFull(rr.r, rr.post)
	return noEOF(err)
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// noEOF turns an end of file inside a record into an error of its own.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// runHeap orders the run readers by their current term, then by run.
type runHeap []*runReader

func (h runHeap) Len() int { return len(h) }
func (h runHeap) Less(i, j int) bool {
	if c := string(h[i].term); c != string(h[j].term) {
		return c < string(h[j].term)
	}
	return h[i].seq < h[j].seq
}
func (h runHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)   { *h = append(*h, x.(*runReader)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// mergeRuns merges the runs of dir into out's bm25.dict, bm25.terms and bm25.postings, hands
// each term's postings to blocks, and returns the number of terms. Memory: one record and a
// 1 MiB buffer per run.
func mergeRuns(dir string, runs []string, out string, blocks *blockPipe) (int64, error) {
	var h runHeap
	defer func() {
		for _, rr := range h {
			rr.f.Close()
		}
	}()
	for i, name := range runs {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return 0, err
		}
		rr := &runReader{r: bufio.NewReaderSize(f, 1<<20), f: f, seq: i}
		if err := rr.next(); err != nil {
			f.Close()
			if errors.Is(err, io.EOF) {
				continue
			}
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		h = append(h, rr)
	}
	heap.Init(&h)
	files := make([]*os.File, 3)
	writers := make([]*bufio.Writer, 3)
	names := []string{dictName, termsName, postingsName}
	for i, name := range names {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return 0, err
		}
		defer f.Close()
		files[i], writers[i] = f, bufio.NewWriterSize(f, 1<<20)
	}
	dict, terms, post := writers[0], writers[1], writers[2]
	var termOff, postOff, count int64
	var entry [dictEntrySize]byte
	writeEntry := func(df uint64) {
		binary.LittleEndian.PutUint64(entry[0:], uint64(termOff))
		binary.LittleEndian.PutUint64(entry[8:], uint64(postOff))
		binary.LittleEndian.PutUint64(entry[16:], df)
		dict.Write(entry[:])
	}
	var cur []byte
	for len(h) > 0 {
		cur = append(cur[:0], h[0].term...)
		var df uint64
		last := int64(-1)
		var written int64
		for len(h) > 0 && string(h[0].term) == string(cur) {
			rr := h[0]
			p := rr.post
			// A run's first posting is relative to -1; make it relative to the previous run's last doc.
			d, n := binary.Uvarint(p)
			if n <= 0 {
				return 0, fmt.Errorf("%s: bad postings of %q", runs[rr.seq], cur)
			}
			var tmp [binary.MaxVarintLen64]byte
			first := binary.PutUvarint(tmp[:], uint64(int64(d)-1-last))
			post.Write(tmp[:first])
			post.Write(p[n:])
			blocks.append(tmp[:first])
			blocks.append(p[n:])
			written += int64(first + len(p) - n)
			df += rr.df
			last = int64(rr.last)
			if err := rr.next(); err != nil {
				if !errors.Is(err, io.EOF) {
					return 0, fmt.Errorf("%s: %w", runs[rr.seq], err)
				}
				rr.f.Close()
				heap.Pop(&h)
				continue
			}
			heap.Fix(&h, 0)
		}
		blocks.endTerm()
		writeEntry(df)
		terms.Write(cur)
		termOff += int64(len(cur))
		postOff += written
		count++
	}
	writeEntry(0)
	for i, name := range names {
		if err := writers[i].Flush(); err != nil {
			return 0, err
		}
		if err := files[i].Sync(); err != nil {
			return 0, err
		}
		if err := os.Rename(filepath.Join(dir, name), filepath.Join(out, name)); err != nil {
			return 0, err
		}
	}
	return count, nil
}
