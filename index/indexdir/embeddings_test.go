package indexdir

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"needle/faissgo"
	"needle/internal/byteview"
	"needle/testkit/testvec"
)

// A FAISS flat index file serves as --embeddings: its rows are read in place; a truncated
// one is refused, and a dimension given must agree with it.
func TestEmbeddingsFromFlatIndex(t *testing.T) {
	const n, dim = 37, 8
	want := testvec.Unit(n, dim, 7)
	var buf bytes.Buffer
	err := faissgo.WriteFlat(&buf, faissgo.IP, dim, n, func(w io.Writer) error {
		_, err := w.Write(byteview.Float32s(want))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "e5_Flat.index")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := OpenEmbeddings(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got := make([]float32, 5*dim)
	if err := e.Read(30, got); err != nil || e.Len() != n || e.Dim() != dim || !slices.Equal(got, want[30*dim:35*dim]) {
		t.Fatalf("rows %d dim %d err %v; rows 30..34 equal: %v", e.Len(), e.Dim(), err, slices.Equal(got, want[30*dim:35*dim]))
	}
	if _, err := OpenEmbeddings(path, 16); err == nil || !strings.Contains(err.Error(), "Dim: 16, but") {
		t.Fatalf("--dim 16 over a dim 8 index: %v", err)
	}
	if err := os.WriteFile(path, buf.Bytes()[:buf.Len()-4], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenEmbeddings(path, 0); err == nil {
		t.Fatal("a truncated flat index was accepted")
	}
}

func TestParseNpyHeader(t *testing.T) {
	mk := func(version byte, dict string) []byte {
		b := []byte("\x93NUMPY")
		b = append(b, version, 0)
		if version == 1 {
			b = binary.LittleEndian.AppendUint16(b, uint16(len(dict)))
		} else {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(dict)))
		}
		return append(b, dict...)
	}
	v1 := "{'descr': '<f4', 'fortran_order': False, 'shape': (7, 384), }   \n"
	h, err := parseNpyHeader(mk(1, v1))
	if err != nil || h.rows != 7 || h.cols != 384 || h.dataStart != int64(10+len(v1)) {
		t.Fatalf("v1: %+v %v", h, err)
	}
	v2 := "{'shape': (0, 2), 'fortran_order': False, 'descr': '<f4'}"
	if h, err := parseNpyHeader(mk(2, v2)); err != nil || h.dataStart != int64(12+len(v2)) {
		t.Fatalf("v2: %+v %v", h, err)
	}
	for dict, want := range map[string]string{
		"{'descr': '<f8', 'fortran_order': False, 'shape': (7, 3), }":  "descr",
		"{'descr': '>f4', 'fortran_order': False, 'shape': (7, 3), }":  "descr",
		"{'descr': '<f4', 'fortran_order': True, 'shape': (7, 3), }":   "fortran_order",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (7,), }":    "shape",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (7, 3, 2)}": "shape",
	} {
		if _, err := parseNpyHeader(mk(1, dict)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want one naming %s", dict, err, want)
		}
	}
	if _, err := parseNpyHeader([]byte("PK\x03\x04 not npy")); err == nil {
		t.Error("accepted a non-npy file")
	}
}

func FuzzParseNpyHeader(f *testing.F) {
	f.Add([]byte("\x93NUMPY\x01\x00\x3a\x00{'descr': '<f4', 'fortran_order': False, 'shape': (7, 3), }"))
	f.Add([]byte("\x93NUMPY\x03\x00\xff\xff\xff\xff"))
	f.Add([]byte("\x93NUMPY\x01\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseNpyHeader(b)
		if err == nil && (h.cols <= 0 || h.rows < 0 || h.dataStart > int64(len(b))) {
			t.Fatalf("accepted header %+v", h)
		}
	})
}
