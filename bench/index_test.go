package bench

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"needle/faissgo"
	"needle/index/compact"
	"needle/internal/byteview"
	"needle/testkit/testvec"
)

// The report of a small set: FAISS gives the same answers, and ground truth taken from
// FAISS's own search gives recall 1.
func TestIndexReportOfAFlatFile(t *testing.T) {
	const n, dim, nq, gtk = 3000, 32, 20, 10
	dir := t.TempDir()
	db, q := testvec.Unit(n, dim, 1), testvec.Unit(nq, dim, 2)
	ref, err := faissgo.New(dim, "Flat", faissgo.IP)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	if err := ref.Add(db); err != nil {
		t.Fatal(err)
	}
	index, queries, gt := filepath.Join(dir, "flat.index"), filepath.Join(dir, "q.f32"), filepath.Join(dir, "gt.i64")
	if err := ref.WriteFile(index); err != nil {
		t.Fatal(err)
	}
	d, l := make([]float32, nq*gtk), make([]int64, nq*gtk)
	if err := ref.Search(q, gtk, d, l); err != nil {
		t.Fatal(err)
	}
	gtBytes := make([]byte, 8*len(l))
	for i, v := range l {
		binary.LittleEndian.PutUint64(gtBytes[8*i:], uint64(v))
	}
	os.WriteFile(queries, byteview.Float32s(q), 0o644)
	os.WriteFile(gt, gtBytes, 0o644)
	var out bytes.Buffer
	err = Index(&out, IndexOptions{Index: index, Queries: queries, GT: gt, GTK: gtk, K: 10, Batch: 7, Batches: 3, Faiss: true})
	if err != nil {
		t.Fatal(err)
	}
	var r IndexReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Rows != n || r.Dim != dim || len(r.Batches) != 3 || r.RecallAt10 != 1 || r.FaissLabelDiffs != 0 || r.FaissMaxScoreDif > 1e-6 || r.QPS <= 0 { // scores within ulps of FAISS's (flatscan.h)
		t.Errorf("report %s", out.Bytes())
	}
	if err := Index(&out, IndexOptions{Index: index, Queries: gt, K: 10, Batch: 1, Batches: 1}); err == nil {
		t.Error("queries file of another width: no error")
	}

	// A compact form of the file, opened as serve opens it: re-scoring every row is exact.
	form := filepath.Join(dir, "form")
	if _, err := compact.Convert(compact.Config{From: index, Out: form, Factory: "IVF4,PQ8x4np", Nprobe: 4}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := Index(&out, IndexOptions{Index: form, Rescore: n, Queries: queries, GT: gt, GTK: gtk, K: 10, Batch: 7, Batches: 3}); err != nil {
		t.Fatal(err)
	}
	r = IndexReport{}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Backend != "compact" || r.RecallAt10 != 1 || r.IndexBytes <= 0 {
		t.Errorf("compact form report %s (%v)", out.Bytes(), err)
	}
}
