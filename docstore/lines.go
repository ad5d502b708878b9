package docstore

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sys/unix"

	"needle/internal/atomicfile"
)

// Sidecar header, shared by both sidecar kinds (64 bytes, little endian):
// magic [8] | data file fingerprint [32] | rows u64 | kind-specific u64 | kind-specific u64.
// The offsets sidecar's extra1 is the xxhash64 of its offsets, so that a sidecar damaged
// after it was written is found at open and rebuilt (version 01 had none: rebuilt too).
const (
	headerSize   = 64
	offsetsMagic = "NDLOFS02"
	offsetsExt   = ".needle-offsets"
)

type header struct {
	magic  string
	fp     fingerprint
	rows   int64
	extra1 int64
	extra2 int64
}

func (h header) put(b []byte) {
	copy(b[0:8], h.magic)
	h.fp.put(b[8:40])
	binary.LittleEndian.PutUint64(b[40:], uint64(h.rows))
	binary.LittleEndian.PutUint64(b[48:], uint64(h.extra1))
	binary.LittleEndian.PutUint64(b[56:], uint64(h.extra2))
}

func getHeader(b []byte) header {
	return header{
		magic:  string(b[0:8]),
		fp:     getFingerprint(b[8:40]),
		rows:   int64(binary.LittleEndian.Uint64(b[40:])),
		extra1: int64(binary.LittleEndian.Uint64(b[48:])),
		extra2: int64(binary.LittleEndian.Uint64(b[56:])),
	}
}

// lineFile is a JSONL file mapped read-only, with its offsets sidecar mapped too: line i
// (0-based) is data[off[i]:off[i+1]] minus its "\n" and a "\r" before it. Every "\n" ends a
// line, and bytes after the last "\n" are one more line, so lines never shift: an empty
// or broken line is still a line. Neither file is read into the Go heap, so RSS only holds
// the pages recently touched. Safe for concurrent readers; close only when they are done.
type lineFile struct {
	path    string
	sidecar string // path of the offsets sidecar in use
	fp      fingerprint
	data    []byte // the whole data file
	side    []byte // the whole offsets sidecar
	offs    []byte // side[headerSize:]: rows+1 u64 offsets into data
	rows    int64
	changed atomic.Pointer[error] // set by the first read that faulted (fault.go)
}

func openLines(path string, opt Options) (*lineFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *PathError: "open <path>: no such file or directory" etc.
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if st.Size() == 0 {
		return nil, fmt.Errorf("%s: empty file (no rows)", path)
	}
	fp, err := fingerprintOf(f)
	if err != nil {
		return nil, err
	}
	l := &lineFile{path: path, fp: fp}
	fresh := func(side []byte) bool {
		h := getHeader(side)
		// A line takes at least one byte, so 0 < rows <= size bounds the length check.
		if !(h.magic == offsetsMagic && h.fp == fp && h.rows > 0 && h.rows <= fp.size &&
			int64(len(side)) == headerSize+8*(h.rows+1) &&
			binary.LittleEndian.Uint64(side[headerSize:]) == 0 &&
			binary.LittleEndian.Uint64(side[len(side)-8:]) == uint64(fp.size)) {
			return false
		}
		sum := xxhash.Sum64(side[headerSize:])
		dropResident(side, 0, len(side)) // the check read all of it; lines read later fault their pages back
		return sum == uint64(h.extra1)
	}
	build := func(dst *os.File) error { return writeOffsets(f, fp, dst, opt.Progress) }
	l.side, l.sidecar, err = findOrBuild(path, offsetsExt, opt, fresh, build)
	if err != nil {
		return nil, err
	}
	l.offs = l.side[headerSize:]
	l.rows = getHeader(l.side).rows
	if l.data, err = mapFile(f, fp.size); err != nil {
		l.Close()
		return nil, err
	}
	if st2, err := f.Stat(); err != nil || st2.Size() != fp.size || st2.ModTime().UnixNano() != fp.mtime {
		l.Close()
		return nil, fmt.Errorf("%s changed while it was being opened; open it again once it is complete", path)
	}
	return l, nil
}

// findOrBuild maps the sidecar <data file name><ext> from the first folder of
// sidecarDirs where fresh accepts it, else builds it with build in the first folder that
// is writable, and maps that.
func findOrBuild(path, ext string, opt Options, fresh func([]byte) bool, build func(*os.File) error) ([]byte, string, error) {
	dirs, err := sidecarDirs(path, opt)
	if err != nil {
		return nil, "", err
	}
	name := filepath.Base(path) + ext
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if side, err := mapPath(p); err == nil {
			if len(side) >= headerSize && fresh(side) {
				return side, p, nil
			}
			unix.Munmap(side)
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		err := os.MkdirAll(d, 0o755)
		if err == nil {
			// temp file, fsync, rename: never half-written. Mode 0644 (atomicfile.Create),
			// readable by all like the data file, so other users of a shared corpus can use it.
			err = atomicfile.Create(p, build)
		}
		if unwritable(err) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		side, err := mapPath(p)
		if err != nil {
			return nil, "", err
		}
		if len(side) < headerSize || !fresh(side) {
			unix.Munmap(side)
			return nil, "", fmt.Errorf("sidecar %s was replaced while it was being opened", p)
		}
		return side, p, nil
	}
	return nil, "", fmt.Errorf("sidecar for %s: no writable folder among %v (set a sidecar folder)", path, dirs)
}

func mapPath(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return mapFile(f, st.Size())
}

// scanChunk is the read size of the sidecar build: big enough that syscalls cost nothing,
// small enough to stay in L2/L3.
const scanChunk = 1 << 20

// writeOffsets scans f for newlines and writes the offsets sidecar into dst. It reads f
// sequentially through one buffer (no mmap, so RSS stays flat) and does not parse JSON.
func writeOffsets(f *os.File, fp fingerprint, dst *os.File, progress func(done, total int64)) error {
	if _, err := dst.Write(make([]byte, headerSize)); err != nil { // header goes last
		return err
	}
	sum := xxhash.New()
	offsets := io.MultiWriter(dst, sum)
	buf := make([]byte, scanChunk)
	out := make([]byte, 0, scanChunk)
	out = binary.LittleEndian.AppendUint64(out, 0)
	var rows, pos int64
	for pos < fp.size {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), fp.size-pos)], pos)
		if err != nil && !(errors.Is(err, io.EOF) && n > 0) {
			return fmt.Errorf("read %s: %w (did it shrink while being indexed?)", f.Name(), err)
		}
		chunk := buf[:n]
		for i := 0; ; {
			j := bytes.IndexByte(chunk[i:], '\n')
			if j < 0 {
				break
			}
			i += j + 1
			rows++
			if end := pos + int64(i); end < fp.size {
				if len(out)+8 > cap(out) {
					if _, err := offsets.Write(out); err != nil {
						return err
					}
					out = out[:0]
				}
				out = binary.LittleEndian.AppendUint64(out, uint64(end))
			}
		}
		pos += int64(n)
		if progress != nil {
			progress(pos, fp.size)
		}
	}
	if _, err := f.ReadAt(buf[:1], fp.size-1); err != nil {
		return fmt.Errorf("read %s: %w", f.Name(), err)
	}
	if buf[0] != '\n' {
		rows++ // the bytes after the last newline are a line too
	}
	out = binary.LittleEndian.AppendUint64(out, uint64(fp.size))
	if _, err := offsets.Write(out); err != nil {
		return err
	}
	if st, err := f.Stat(); err != nil || st.Size() != fp.size || st.ModTime().UnixNano() != fp.mtime {
		return fmt.Errorf("%s changed while its sidecar was being built", f.Name())
	}
	hdr := make([]byte, headerSize)
	header{magic: offsetsMagic, fp: fp, rows: rows, extra1: int64(sum.Sum64())}.put(hdr)
	_, err := dst.WriteAt(hdr, 0)
	return err
}

// line returns line i without its line ending; a view into the mapping.
func (l *lineFile) line(i int64) ([]byte, error) {
	if i < 0 || i >= l.rows {
		return nil, fmt.Errorf("%s: row %d out of range [0, %d)", l.path, i, l.rows)
	}
	start, end := l.offset(i), l.offset(i+1)
	if start > end || end > uint64(len(l.data)) {
		return nil, fmt.Errorf("sidecar %s is corrupt at row %d; delete it to rebuild", l.sidecar, i)
	}
	b := l.data[start:end]
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b, nil
}

// scanChunkRows is how many lines a worker of scanLines takes at a time.
const scanChunkRows = 1 << 16

// scanLines runs check on every line, on all cores, a chunk of lines at a time, and hands
// each chunk's kept results to collect in the calling goroutine, chunks in any order;
// lo and hi bound the chunk's lines. Pages of a checked chunk are dropped from RSS.
func scanLines[T any](l *lineFile, check func(i int64, line []byte) (T, bool), collect func(lo, hi int64, results []T)) error {
	type chunk struct {
		lo, hi  int64
		results []T
		err     error
	}
	var next atomic.Int64
	chunks := make(chan chunk)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				c := chunk{lo: next.Add(scanChunkRows) - scanChunkRows}
				if c.lo >= l.rows {
					return
				}
				c.hi = min(c.lo+scanChunkRows, l.rows)
				for i := c.lo; i < c.hi && c.err == nil; i++ {
					line, err := l.line(i)
					if err != nil {
						c.err = err
					} else if r, keep := check(i, line); keep {
						c.results = append(c.results, r)
					}
				}
				if c.err == nil {
					dropResident(l.data, int(l.offset(c.lo)), int(l.offset(c.hi)))
				}
				chunks <- c
			}
		})
	}
	go func() { wg.Wait(); close(chunks) }()
	var firstErr error
	for c := range chunks {
		if firstErr == nil {
			firstErr = c.err
		}
		if firstErr == nil {
			collect(c.lo, c.hi, c.results)
		}
	}
	return firstErr
}

// offset is where line i starts (i == rows: the file size); valid after line(i) succeeded.
func (l *lineFile) offset(i int64) uint64 { return binary.LittleEndian.Uint64(l.offs[8*i:]) }

// validate checks every line as stringField(line, key) does, on all cores, and returns
// the bad ones in line order. progress (may be nil) is called from this goroutine with
// lines done and total.
func (l *lineFile) validate(key string, progress func(done, total int64)) ([]BadRowError, error) {
	var bad []BadRowError
	var done int64
	err := scanLines(l, func(i int64, line []byte) (BadRowError, bool) {
		_, _, reason := stringField(line, key)
		return BadRowError{Path: l.path, Line: i + 1, Reason: reason}, reason != ""
	}, func(lo, hi int64, chunkBad []BadRowError) {
		bad = append(bad, chunkBad...)
		if done += hi - lo; progress != nil {
			progress(done, l.rows)
		}
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(bad, func(a, b BadRowError) int { return cmp.Compare(a.Line, b.Line) })
	return bad, nil
}

// Close unmaps both files. Views returned earlier become invalid.
func (l *lineFile) Close() error {
	var err error
	for _, m := range []*[]byte{&l.data, &l.side} {
		if *m != nil {
			err = errors.Join(err, unix.Munmap(*m))
			*m = nil
		}
	}
	l.offs, l.rows = nil, 0
	return err
}
