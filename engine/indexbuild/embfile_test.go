package indexbuild

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"needle/faissgo"
	"needle/testkit/testvec"
)

// A FAISS flat index file serves as --embeddings: its rows are read in place; a truncated
// one is refused, and --dim must agree with it.
func TestEmbeddingsFromFlatIndex(t *testing.T) {
	const n, dim = 37, 8
	want := testvec.Unit(n, dim, 7)
	var buf bytes.Buffer
	err := faissgo.WriteFlat(&buf, faissgo.IP, dim, n, func(w io.Writer) error {
		var raw []byte
		return writeFloats(w, want, &raw)
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
	if _, err := OpenEmbeddings(path, 16); err == nil || !strings.Contains(err.Error(), "--dim is 16") {
		t.Fatalf("--dim 16 over a dim 8 index: %v", err)
	}
	if err := os.WriteFile(path, buf.Bytes()[:buf.Len()-4], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenEmbeddings(path, 0); err == nil {
		t.Fatal("a truncated flat index was accepted")
	}
}
