package faissgo

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"needle/internal/byteview"
)

// putFloats is the data WriteFlat's caller streams: little-endian float32s.
func putFloats(v []float32) []byte { return byteview.Float32s(v) }

// The oracle is FAISS's own writer: an IndexFlat of the same vectors written by FAISS.
func TestWriteFlatMatchesFAISSWriter(t *testing.T) {
	const dim, n = 24, 300
	db := randomVectors(n, dim, 7)
	for _, m := range []Metric{IP, L2} {
		path := filepath.Join(t.TempDir(), "faiss.index")
		if err := mustBuild(t, dim, "Flat", m, db).WriteFile(path); err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		err = WriteFlat(&got, m, dim, n, func(data io.Writer) error {
			for i := 0; i < n; i += 64 { // streamed in chunks, as needle build does
				if _, err := data.Write(putFloats(db[i*dim : min(i+64, n)*dim])); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("%v: WriteFlat's %d bytes differ from FAISS's %d", m, got.Len(), len(want))
		}
		if len(want) != FlatHeaderBytes+4*n*dim {
			t.Errorf("%v: FAISS wrote %d bytes, want FlatHeaderBytes + the vectors = %d", m, len(want), FlatHeaderBytes+4*n*dim)
		}
	}
}

func TestWriteFlatRejectsWrongSizes(t *testing.T) {
	rows := func(floats int) func(io.Writer) error {
		return func(w io.Writer) error {
			_, err := w.Write(make([]byte, 4*floats))
			return err
		}
	}
	for _, tc := range []struct {
		name    string
		m       Metric
		dim     int
		n       int64
		vectors func(io.Writer) error
		want    string
	}{
		{"one row short", IP, 4, 3, rows(8), "32 bytes of vectors written, want 48"},
		{"one float over", L2, 4, 3, rows(13), "52 bytes of vectors written, want 48"},
		{"zero dimension", IP, 0, 3, rows(0), "dimension 0"},
		{"negative count", IP, 4, -1, rows(0), "-1 vectors"},
		{"unknown metric", Metric(7), 4, 1, rows(4), "unsupported metric(7)"},
	} {
		err := WriteFlat(io.Discard, tc.m, tc.dim, tc.n, tc.vectors)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
}
