package indexbuild

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
)

// embFile reads an existing embeddings file (`--embeddings`): a headerless float32 memmap
// (the anchors' emb_e5.memmap, N x dim), a NumPy .npy of float32 shape (N, dim), or a FAISS
// flat index file (the anchors' e5_Flat.index), whose vectors are read in place.
type embFile struct {
	f         *os.File
	path      string
	dataStart int64 // byte offset of row 0
	rows      int64
	dim       int
	buf       []byte // Read scratch; an embFile is used by one goroutine
}

// openEmbeddings opens path. For a memmap, dim must be given (> 0); for .npy, dim is read
// from the header and, if given, must match.
func openEmbeddings(path string, dim int) (*embFile, error) {
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

func describeEmbeddings(f *os.File, path string, dim int) (*embFile, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	e := &embFile{f: f, path: path, dim: dim}
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
			return nil, fmt.Errorf("%s: shape (%d, %d), but --dim is %d", path, h.rows, h.cols, dim)
		}
		e.dataStart, e.rows, e.dim = h.dataStart, h.rows, h.cols
		if want := h.dataStart + 4*h.rows*int64(h.cols); st.Size() != want {
			return nil, fmt.Errorf("%s: %d bytes, want %d for shape (%d, %d)", path, st.Size(), want, h.rows, h.cols)
		}
		return e, nil
	}
	if flat, info, err := flatIndex(f, path); err != nil {
		return nil, err
	} else if flat {
		if dim > 0 && info.Dim != dim {
			return nil, fmt.Errorf("%s: a FAISS %s of dimension %d, but --dim is %d", path, info.TypeName(), info.Dim, dim)
		}
		e.dataStart, e.rows, e.dim = faissgo.FlatHeaderBytes, info.Ntotal, info.Dim
		return e, nil
	}
	if dim <= 0 {
		return nil, fmt.Errorf("%s: a headerless float32 file needs --dim (or a manifest.json beside it)", path)
	}
	if st.Size()%(4*int64(dim)) != 0 {
		return nil, fmt.Errorf("%s: %d bytes is not a whole number of float32 rows of dim %d", path, st.Size(), dim)
	}
	e.rows = st.Size() / (4 * int64(dim))
	return e, nil
}

func (e *embFile) Len() int64   { return e.rows }
func (e *embFile) Dim() int     { return e.dim }
func (e *embFile) Close() error { return e.f.Close() }

// Read fills dst with rows [start, start+len(dst)/dim).
func (e *embFile) Read(start int64, dst []float32) error {
	if err := readFloatsAt(e.f, e.dataStart+4*start*int64(e.dim), dst, &e.buf); err != nil {
		return fmt.Errorf("%s: %w", e.path, err)
	}
	return nil
}

// flatIndex reports whether f (at path) starts with a FAISS flat index tag and, if so,
// checks the whole file as faissgo.Stat does and returns what it holds.
func flatIndex(f *os.File, path string) (bool, faissgo.FileInfo, error) {
	tag := make([]byte, 4)
	if _, err := f.ReadAt(tag, 0); err != nil || !(faissgo.FileInfo{Type: string(tag)}).IsFlat() {
		return false, faissgo.FileInfo{}, nil
	}
	info, err := faissgo.Stat(path)
	if err != nil {
		return false, info, err
	}
	return true, info, nil
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
