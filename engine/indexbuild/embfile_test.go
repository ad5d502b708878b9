package indexbuild

import (
	"bytes"
	"io"
	"needle/testkit/testvec"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"needle/faissgo"
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

// scored is a Searcher answering fixed hits for every query.
type scored struct {
	labels []int64
	dist   []float32
}

func (s scored) Search(q []float32, k int, dist []float32, labels []int64) error {
	copy(labels, s.labels)
	copy(dist, s.dist)
	return nil
}

// Agreement counts hits by score: a row tied with exact's k-th counts, a worse one does not,
// for inner products (best first = largest) and L2 distances (smallest).
func TestAgreement(t *testing.T) {
	q := []float32{1}
	for _, tc := range []struct {
		got, exact scored
		want       float64
	}{
		{scored{[]int64{1, 9}, []float32{0.9, 0.5}}, scored{[]int64{1, 2}, []float32{0.9, 0.5}}, 1},   // 9 ties with 2
		{scored{[]int64{1, 9}, []float32{0.9, 0.4}}, scored{[]int64{1, 2}, []float32{0.9, 0.5}}, 0.5}, // 9 is worse
		{scored{[]int64{1, -1}, []float32{0.9, 0}}, scored{[]int64{1, 2}, []float32{0.9, 0.5}}, 0.5},  // a missing hit
		{scored{[]int64{1, 9}, []float32{0.1, 0.3}}, scored{[]int64{1, 2}, []float32{0.1, 0.3}}, 1},   // L2: tie
		{scored{[]int64{1, 9}, []float32{0.1, 0.4}}, scored{[]int64{1, 2}, []float32{0.1, 0.3}}, 0.5}, // L2: worse
	} {
		if got, err := Agreement(tc.got, tc.exact, q, 1, 2); err != nil || got != tc.want {
			t.Errorf("Agreement(%v, %v) = %v, %v; want %v", tc.got, tc.exact, got, err, tc.want)
		}
	}
}
