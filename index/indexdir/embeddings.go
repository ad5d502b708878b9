package indexdir

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"needle/faissgo"
	"needle/internal/byteview"
	"needle/internal/option"
	"needle/internal/pagecache"
)

// Embeddings reads an existing embeddings file (`needle build --embeddings`, `needle
// convert`): a headerless float32 memmap (the anchors' emb_e5.memmap, N x dim), a NumPy .npy
// of float32 shape (N, dim), or a FAISS flat index file (the anchors' e5_Flat.index), whose
// vectors are read in place. Rows are contiguous little-endian float32s from Offset.
type Embeddings struct {
	f         *os.File
	path      string
	dataStart int64 // byte offset of row 0
	rows      int64
	dim       int
	metric    string // "ip" or "l2" for a FAISS flat file, "" for the others (their files do not say)
	// dropBehind: the file is larger than half of RAM (pagecache.TooLarge), so the rows
	// Read returns are dropped from the page cache (a build or conversion reads each once).
	dropBehind bool
}

// OpenEmbeddings opens path. For a memmap, dim must be given (> 0); for .npy, dim is read
// from the header and, if given, must match.
func OpenEmbeddings(path string, dim int) (*Embeddings, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	e, err := describeEmbeddings(f, path, dim)
	if err != nil {
		f.Close()
		return nil, err
	}
	return e, nil
}

func describeEmbeddings(f *os.File, path string, dim int) (*Embeddings, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	e := &Embeddings{f: f, path: path, dim: dim, dropBehind: pagecache.TooLarge(st.Size())}
	if strings.EqualFold(filepath.Ext(path), ".npy") {
		head := make([]byte, min(st.Size(), 1<<16))
		if _, err := f.ReadAt(head, 0); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		h, err := parseNpyHeader(head)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if dim > 0 && h.cols != dim {
			return nil, option.Errorf("Dim", "%d, but %s has shape (%d, %d)", dim, path, h.rows, h.cols)
		}
		e.dataStart, e.rows, e.dim = h.dataStart, h.rows, h.cols
		if want := h.dataStart + 4*h.rows*int64(h.cols); st.Size() != want {
			return nil, fmt.Errorf("%s: %d bytes, want %d for shape (%d, %d)", path, st.Size(), want, h.rows, h.cols)
		}
		return e, nil
	}
	if flat, v, err := flatIndex(f, path); err != nil {
		return nil, err
	} else if flat {
		if dim > 0 && v.Dim != dim {
			return nil, option.Errorf("Dim", "%d, but %s is a FAISS %s of dimension %d", dim, path, v.TypeName(), v.Dim)
		}
		e.dataStart, e.rows, e.dim, e.metric = v.Offset, v.Ntotal, v.Dim, strings.ToLower(v.Metric.String())
		return e, nil
	}
	if dim <= 0 {
		return nil, option.Errorf("Dim", "required: %s is a headerless float32 file (or give it a manifest.json beside it)", path)
	}
	if st.Size()%(4*int64(dim)) != 0 {
		return nil, fmt.Errorf("%s: %d bytes is not a whole number of float32 rows of dim %d", path, st.Size(), dim)
	}
	e.rows = st.Size() / (4 * int64(dim))
	return e, nil
}

func (e *Embeddings) Len() int64   { return e.rows }
func (e *Embeddings) Dim() int     { return e.dim }
func (e *Embeddings) Path() string { return e.path }
func (e *Embeddings) Close() error { return e.f.Close() }

// Offset is the byte offset of row 0 in the file.
func (e *Embeddings) Offset() int64 { return e.dataStart }

// Metric is "ip" or "l2" for a FAISS flat index file, "" for a memmap or .npy.
func (e *Embeddings) Metric() string { return e.metric }

// Read fills dst with rows [start, start+len(dst)/dim).
func (e *Embeddings) Read(start int64, dst []float32) error {
	off := e.dataStart + 4*start*int64(e.dim)
	if _, err := e.f.ReadAt(byteview.Float32s(dst), off); err != nil { // little-endian floats read in place
		return fmt.Errorf("%s: %w", e.path, err)
	}
	if e.dropBehind {
		pagecache.Drop(e.f, off, 4*int64(len(dst)))
	}
	return nil
}

// flatIndex reports whether f (at path) starts with a FAISS flat index tag and, if so,
// checks the whole file as faissgo.StatFlat does (a truncated file is an error naming both
// sizes) and returns where its vectors lie. A file of another FAISS index class is an error
// naming it and the classes read.
func flatIndex(f *os.File, path string) (bool, faissgo.FlatVectors, error) {
	tag := make([]byte, 4)
	if _, err := f.ReadAt(tag, 0); err != nil {
		return false, faissgo.FlatVectors{}, nil
	}
	if other := (faissgo.FileInfo{Type: string(tag)}); !other.IsFlat() {
		if other.TypeName() != "" {
			return false, faissgo.FlatVectors{}, fmt.Errorf("%s is a FAISS %s, not a flat index: embeddings are read from %s files, headerless float32 memmaps and float32 .npy files",
				path, other.TypeName(), faissgo.FlatClasses)
		}
		return false, faissgo.FlatVectors{}, nil
	}
	v, err := faissgo.StatFlat(path)
	return err == nil, v, err
}

// npyHeader is what needle needs of a .npy header.
type npyHeader struct {
	dataStart int64
	rows      int64
	cols      int
}

var (
	npyDescr   = regexp.MustCompile(`'descr'\s*:\s*'([^']*)'`)
	npyFortran = regexp.MustCompile(`'fortran_order'\s*:\s*(True|False)`)
	npyShape   = regexp.MustCompile(`'shape'\s*:\s*\(\s*(\d+)\s*,\s*(\d+)\s*,?\s*\)`)
)

// parseNpyHeader reads the NumPy format header (versions 1-3) at the start of b and accepts
// only little-endian float32, C order, 2-D.
func parseNpyHeader(b []byte) (npyHeader, error) {
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" {
		return npyHeader{}, errors.New("not a .npy file (no \\x93NUMPY magic)")
	}
	var hlen, start int
	switch b[6] {
	case 1:
		hlen, start = int(binary.LittleEndian.Uint16(b[8:])), 10
	case 2, 3:
		if len(b) < 12 {
			return npyHeader{}, errors.New(".npy header truncated")
		}
		hlen, start = int(binary.LittleEndian.Uint32(b[8:])), 12
	default:
		return npyHeader{}, fmt.Errorf(".npy format version %d not supported", b[6])
	}
	if hlen > len(b)-start {
		return npyHeader{}, fmt.Errorf(".npy header of %d bytes is truncated", hlen)
	}
	dict := string(b[start : start+hlen])
	descr := npyDescr.FindStringSubmatch(dict)
	if descr == nil || (descr[1] != "<f4" && descr[1] != "float32") {
		return npyHeader{}, fmt.Errorf(".npy descr %q: want '<f4' (little-endian float32)", npyField(descr))
	}
	if m := npyFortran.FindStringSubmatch(dict); m == nil || m[1] != "False" {
		return npyHeader{}, errors.New(".npy fortran_order: want False (C order)")
	}
	shape := npyShape.FindStringSubmatch(dict)
	if shape == nil {
		return npyHeader{}, fmt.Errorf(".npy shape in %q: want 2-D (rows, dim)", dict)
	}
	rows, err1 := strconv.ParseInt(shape[1], 10, 64)
	cols, err2 := strconv.ParseInt(shape[2], 10, 32)
	if err1 != nil || err2 != nil || cols <= 0 || rows > 1<<40 {
		return npyHeader{}, fmt.Errorf(".npy shape (%s, %s): out of range", shape[1], shape[2])
	}
	return npyHeader{dataStart: int64(start + hlen), rows: rows, cols: int(cols)}, nil
}

func npyField(m []string) string {
	if m == nil {
		return "(missing)"
	}
	return m[1]
}
