package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"needle/internal/byteview"
	"needle/testkit/testenv"
)

// writeFile writes tensors with Create/WriteTensor and returns the path.
func writeFile(t *testing.T, tensors []Tensor, data [][]byte, meta map[string]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.safetensors")
	w, err := Create(path, tensors, meta)
	if err != nil {
		t.Fatal(err)
	}
	for i, tt := range tensors {
		if err := w.WriteTensor(tt.Name, data[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRoundTripAndConversion(t *testing.T) {
	f32 := []float32{1, -2.5, float32(math.Inf(1)), 3e-39}
	// F16: 1.0, -2.0, smallest subnormal (2^-24), +inf
	f16 := []byte{0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00, 0x00, 0x7c}
	bf16 := []byte{0x80, 0x3f, 0x00, 0xc0} // 1.0, -2.0
	tensors := []Tensor{
		{Name: "z.f32", DType: "F32", Shape: []int64{2, 2}},
		{Name: "a.f16", DType: "F16", Shape: []int64{4}},
		{Name: "bf", DType: "BF16", Shape: []int64{1, 2}},
		{Name: "empty", DType: "I64", Shape: []int64{0, 3}},
		{Name: "scalar", DType: "U8", Shape: nil},
	}
	path := writeFile(t, tensors, [][]byte{byteview.Float32s(f32), f16, bf16, nil, {7}}, map[string]string{"format": "pt"})
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.Metadata()["format"]; got != "pt" {
		t.Errorf("metadata format = %q", got)
	}
	var names []string
	for _, tt := range f.Tensors() {
		names = append(names, tt.Name)
	}
	if strings.Join(names, ",") != "z.f32,a.f16,bf,empty,scalar" {
		t.Errorf("file order = %v", names)
	}
	check := func(name string, want []float32) {
		got, err := f.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s[%d] = %g, want %g", name, i, got[i], want[i])
			}
		}
	}
	check("z.f32", f32)
	check("a.f16", []float32{1, -2, 1.0 / (1 << 24), float32(math.Inf(1))})
	check("bf", []float32{1, -2})
	if b, _ := f.Bytes("scalar"); len(b) != 1 || b[0] != 7 {
		t.Errorf("scalar bytes = %v", b)
	}
	if _, err := f.Float32("scalar"); err == nil || !strings.Contains(err.Error(), `"scalar"`) {
		t.Errorf("Float32 of U8: err = %v", err)
	}
	if _, err := f.Bytes("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("missing tensor: err = %v", err)
	}
}

func TestWriterErrorsLeaveNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.safetensors")
	tensors := []Tensor{{Name: "a", DType: "F32", Shape: []int64{2}}, {Name: "b", DType: "F32", Shape: []int64{1}}}
	for _, tc := range []struct {
		name  string
		write func(w *Writer) error
	}{
		{"out of order", func(w *Writer) error { return w.WriteTensor("b", make([]byte, 4)) }},
		{"too long", func(w *Writer) error { return w.WriteTensor("a", make([]byte, 12)) }},
		{"incomplete", func(w *Writer) error { return w.WriteTensor("a", make([]byte, 4)) }},
		{"extra", func(w *Writer) error {
			w.WriteTensor("a", make([]byte, 8))
			w.WriteTensor("b", make([]byte, 4))
			return w.WriteTensor("c", nil)
		}},
	} {
		w, err := Create(path, tensors, nil)
		if err != nil {
			t.Fatal(err)
		}
		werr := tc.write(w)
		cerr := w.Close()
		if cerr == nil {
			t.Errorf("%s: Close succeeded (write err %v)", tc.name, werr)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 0 {
			t.Errorf("%s: left %d files behind", tc.name, len(entries))
		}
	}
	for _, bad := range [][]Tensor{
		{{Name: "a", DType: "F33", Shape: []int64{1}}},
		{{Name: "a", DType: "F32"}, {Name: "a", DType: "F32"}},
		{{Name: "__metadata__", DType: "F32"}},
		{{Name: "a", DType: "F32", Shape: []int64{-1}}},
	} {
		if _, err := Create(path, bad, nil); err == nil {
			t.Errorf("Create(%v) succeeded", bad)
		}
	}
	w, _ := Create(path, tensors, nil)
	w.Abort()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("Abort left %d files", len(entries))
	}
}

func TestChunkedWrite(t *testing.T) {
	x := []float32{1, 2, 3, 4, 5}
	path := filepath.Join(t.TempDir(), "c.safetensors")
	w, err := Create(path, []Tensor{{Name: "x", DType: "F32", Shape: []int64{5}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := byteview.Float32s(x)
	if err := w.WriteTensor("x", b[:8]); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTensor("x", b[8:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, _ := f.Float32("x")
	for i := range x {
		if got[i] != x[i] {
			t.Fatalf("x[%d] = %g", i, got[i])
		}
	}
}

// rawFile builds a file from a header string and n data bytes.
func rawFile(header string, n int) []byte {
	b := make([]byte, 8+len(header)+n)
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	copy(b[8:], header)
	return b
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct {
		header string
		data   int
		want   string
	}{
		{`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`, 8, "header JSON"},
		{`{"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}}`, 8, "unknown dtype"},
		{`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8, "needs 12 bytes"},
		{`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4, "outside"},
		{`{"a":{"dtype":"F32","shape":[2],"data_offsets":[8]}}`, 8, "data_offsets"},
		{`{"a":{"dtype":"F32","data_offsets":[0,0]}}`, 0, "missing shape"},
		{`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, 0, "invalid shape"},
		{`{"a":{"dtype":"F64","shape":[4611686018427387904,4],"data_offsets":[0,0]}}`, 0, "invalid shape"},
		{`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8, "overlaps"},
		{`{"__metadata__":{"k":1}}`, 0, "__metadata__"},
	} {
		_, err := parse(rawFile(tc.header, tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parse(%s): err = %v, want %q", tc.header, err, tc.want)
		}
	}
	huge := make([]byte, 16)
	binary.LittleEndian.PutUint64(huge, 1<<62)
	if _, err := parse(huge); err == nil {
		t.Error("parse accepted a header length past the file")
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Open of a missing file succeeded")
	}
}

func FuzzParse(f *testing.F) {
	f.Add(rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8))
	f.Add(rawFile(`{"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[1,2],"data_offsets":[0,4]}}`, 4))
	f.Add(rawFile(`{}`, 0))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := parse(b)
		if err != nil {
			return
		}
		// Every accepted tensor must be readable within the buffer.
		for _, tt := range file.Tensors() {
			v, err := file.Bytes(tt.Name)
			if err != nil || int64(len(v)) != tt.NumBytes() {
				t.Fatalf("tensor %q: %d bytes, err %v", tt.Name, len(v), err)
			}
			if tt.DType == "F32" || tt.DType == "F16" || tt.DType == "BF16" {
				if _, err := file.Float32(tt.Name); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

func TestRealMiniLM(t *testing.T) {
	dir := testenv.MiniLMDir(t)
	f, err := Open(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	emb, ok := f.Tensor("embeddings.word_embeddings.weight")
	if !ok {
		emb, ok = f.Tensor("bert.embeddings.word_embeddings.weight")
	}
	if !ok || emb.DType != "F32" || len(emb.Shape) != 2 || emb.Shape[0] != 30522 || emb.Shape[1] != 384 {
		t.Fatalf("word embeddings = %+v (found %v)", emb, ok)
	}
}

// TestPythonInterop checks both directions against the reference `safetensors` package:
// Python reads what we write, and we read what Python writes.
func TestPythonInterop(t *testing.T) {
	py := testenv.Python(t)
	dir := t.TempDir()
	theirs := filepath.Join(dir, "theirs.safetensors")
	x := []float32{0.5, -1, 2, 1e-3, 7, 8}
	ours := writeFile(t, []Tensor{{Name: "x", DType: "F32", Shape: []int64{2, 3}}, {Name: "h", DType: "F16", Shape: []int64{2}}},
		[][]byte{byteview.Float32s(x), {0x00, 0x3c, 0x00, 0xc0}}, map[string]string{"who": "needle"})
	script := `
import sys, json, numpy as np
from safetensors.numpy import load_file, save_file
from safetensors import safe_open
d = load_file(sys.argv[1])
with safe_open(sys.argv[1], "np") as f: meta = f.metadata()
print(json.dumps({"x": d["x"].tolist(), "xshape": list(d["x"].shape), "h": d["h"].astype(np.float32).tolist(), "meta": meta}))
save_file({"b": np.arange(6, dtype=np.float32).reshape(3, 2), "a": np.array([1.5, -2], dtype=np.float16)}, sys.argv[2], metadata={"k": "v"})
`
	out, err := exec.Command(py, "-c", script, ours, theirs).Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	var got struct {
		X      [][]float32
		Xshape []int
		H      []float32
		Meta   map[string]string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.X[1][2] != 8 || got.X[0][0] != 0.5 || got.H[1] != -2 || got.Meta["who"] != "needle" {
		t.Errorf("python read %+v", got)
	}
	f, err := Open(theirs)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, _ := f.Float32("b")
	a, _ := f.Float32("a")
	if len(b) != 6 || b[5] != 5 || a[0] != 1.5 || a[1] != -2 || f.Metadata()["k"] != "v" {
		t.Errorf("we read b=%v a=%v meta=%v", b, a, f.Metadata())
	}
}

// TestHeaderRoundTrip: EncodeHeader's bytes parse back (ParseHeader) to the laid-out tensors
// and metadata, and a header whose length field does not match its bytes is refused.
func TestHeaderRoundTrip(t *testing.T) {
	in := []Tensor{{Name: "w", DType: "BF16", Shape: []int64{2, 3}}, {Name: "s", DType: "F32", Shape: nil}, {Name: "b", DType: "U8", Shape: []int64{5}}}
	meta := map[string]string{"format": "pt"}
	header, laid, err := EncodeHeader(in, meta)
	if err != nil {
		t.Fatal(err)
	}
	if (len(header)-8)%8 != 0 || laid[2].Begin != 16 || laid[2].End != 21 {
		t.Fatalf("layout %+v, header %d bytes", laid, len(header))
	}
	got, gotMeta, err := ParseHeader(header, laid[2].End)
	if err != nil || len(got) != 3 || gotMeta["format"] != "pt" {
		t.Fatalf("ParseHeader: %+v %v %v", got, gotMeta, err)
	}
	for i := range got {
		if got[i].Name != laid[i].Name || got[i].Begin != laid[i].Begin || got[i].End != laid[i].End || got[i].DType != laid[i].DType {
			t.Errorf("tensor %d: %+v, want %+v", i, got[i], laid[i])
		}
	}
	if _, _, err := ParseHeader(header[:len(header)-1], laid[2].End); err == nil {
		t.Error("ParseHeader accepted a header shorter than its length field")
	}
	if _, _, err := EncodeHeader([]Tensor{{Name: "x", DType: "F32"}, {Name: "x", DType: "F32"}}, nil); err == nil {
		t.Error("EncodeHeader accepted a repeated name")
	}
}
