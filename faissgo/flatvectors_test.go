package faissgo

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// StatFlat's offset must point at the vectors FAISS wrote: the bytes there are the rows.
func TestStatFlatFindsTheVectors(t *testing.T) {
	db := randomVectors(300, 8, 9)
	for _, m := range []Metric{IP, L2} {
		file := indexBytes(t, "Flat", m)
		v, err := StatFlat(writeTemp(t, file))
		if err != nil {
			t.Fatal(err)
		}
		if v.Dim != 8 || v.Ntotal != 300 || v.Metric != m || v.Offset != FlatHeaderBytes {
			t.Fatalf("%v: StatFlat = %+v, want 300 x 8, offset %d", m, v, FlatHeaderBytes)
		}
		if !bytes.Equal(file[v.Offset:], putFloats(db)) {
			t.Fatalf("%v: the bytes from offset %d are not the vectors", m, v.Offset)
		}
	}
}

func TestStatFlatRejectsOtherFiles(t *testing.T) {
	flat := indexBytes(t, "Flat", IP)
	badCount := bytes.Clone(flat)
	binary.LittleEndian.PutUint64(badCount[37:], 299*8) // float count field one row short
	for _, c := range []struct {
		name  string
		data  []byte
		parts []string
	}{
		{"HNSW", indexBytes(t, "HNSW8", IP), []string{"IndexHNSWFlat is not a flat index", FlatClasses}},
		{"IVF", indexBytes(t, "IVF4,Flat", IP), []string{"IndexIVFFlat is not a flat index", FlatClasses}},
		{"unknown tag", append([]byte("NOPE"), flat[4:]...), []string{`unknown index type "NOPE"`, FlatClasses}},
		{"one byte short", flat[:len(flat)-1], []string{"file is 9644 bytes", "300 vectors of dimension 8 is 9645 bytes"}},
		{"one byte over", append(bytes.Clone(flat), 0), []string{"file is 9646 bytes", "is 9645 bytes"}},
		{"header only", flat[:FlatHeaderBytes], []string{"file is 45 bytes", "is 9645 bytes"}},
		{"cut in the header", flat[:20], []string{"truncated: header needs 17 bytes, 4 left"}},
		{"wrong float count", badCount, []string{"flat index holds 2392 floats, want ntotal 300 x dimension 8"}},
		{"metric L1", append(append(bytes.Clone(flat[:33]), 2, 0, 0, 0), flat[37:]...), []string{"unsupported metric type 2"}},
	} {
		path := writeTemp(t, c.data)
		_, err := StatFlat(path)
		wantErr(t, c.name, err, append(c.parts, path)...)
	}
}
