// Package testflat writes FAISS flat index files for tests (testvec makes the vectors; it
// cannot import faissgo, whose own tests use it).
package testflat

import (
	"io"
	"os"
	"testing"

	"needle/faissgo"
	"needle/internal/byteview"
)

// WriteFlat writes n rows of dim floats as a FAISS IndexFlatIP/L2 file at path, asking rows
// for them a chunk at a time (a large test file need not be held in memory either).
func WriteFlat(t testing.TB, path string, m faissgo.Metric, dim int, n int64, rows func(start, n int64) []float32) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	err = faissgo.WriteFlat(f, m, dim, n, func(w io.Writer) error {
		for start := int64(0); start < n; start += 8192 {
			if _, err := w.Write(byteview.Float32s(rows(start, min(8192, n-start)))); err != nil {
				return err
			}
		}
		return nil
	})
	if err1 := f.Close(); err == nil {
		err = err1
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Rows serves WriteFlat the rows of v (rows of dim floats held in memory).
func Rows(v []float32, dim int) func(start, n int64) []float32 {
	return func(start, n int64) []float32 { return v[start*int64(dim) : (start+n)*int64(dim)] }
}
