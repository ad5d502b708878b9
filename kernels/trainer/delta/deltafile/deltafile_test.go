package deltafile

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"needle/kernels/trainer/delta"
	"needle/safetensors"
)

type tensor struct {
	name, dtype string
	shape       []int64
	data        []byte
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// perturb returns a copy of b with about frac of its elemSize-byte elements changed.
func perturb(r *rand.Rand, b []byte, elemSize int, frac float64) []byte {
	out := bytes.Clone(b)
	for i := 0; i < len(out); i += elemSize {
		if r.Float64() < frac {
			out[i] ^= byte(1 + r.IntN(255))
		}
	}
	return out
}

func write(t testing.TB, path string, ts []tensor, meta map[string]string) {
	t.Helper()
	desc := make([]safetensors.Tensor, len(ts))
	for i, x := range ts {
		desc[i] = safetensors.Tensor{Name: x.name, DType: x.dtype, Shape: x.shape}
	}
	w, err := safetensors.Create(path, desc, meta)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ts {
		if err := w.WriteTensor(x.name, x.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// models writes a base and a next version covering every case: bf16/fp16/fp32 deltas at
// 0-100% change, an odd size, an I64 tensor (sent in full), a removed, an added and a
// reshaped tensor, and changed metadata.
func models(t testing.TB, dir string) (oldPath, newPath string) {
	r := rand.New(rand.NewPCG(1, 2))
	emb, q, k := randBytes(r, 2*4099*3), randBytes(r, 2*1000), randBytes(r, 4*777)
	steps, gone, moved := randBytes(r, 8*5), randBytes(r, 4*10), randBytes(r, 2*64)
	old := []tensor{
		{"embed.weight", "BF16", []int64{4099, 3}, emb},
		{"layer.0.q", "F16", []int64{1000}, q},
		{"layer.0.k", "F32", []int64{777}, k},
		{"steps", "I64", []int64{5}, steps},
		{"removed.bias", "F32", []int64{10}, gone},
		{"reshaped", "BF16", []int64{8, 8}, moved},
		{"empty", "BF16", []int64{0}, nil},
	}
	next := []tensor{
		{"embed.weight", "BF16", []int64{4099, 3}, perturb(r, emb, 2, 0.01)},
		{"layer.0.k", "F32", []int64{777}, perturb(r, k, 4, 1)},
		{"layer.0.q", "F16", []int64{1000}, bytes.Clone(q)},
		{"steps", "I64", []int64{5}, perturb(r, steps, 8, 0.5)},
		{"added", "F32", []int64{3}, randBytes(r, 12)},
		{"reshaped", "BF16", []int64{4, 16}, moved},
		{"empty", "BF16", []int64{0}, nil},
	}
	oldPath, newPath = filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	write(t, oldPath, old, map[string]string{"step": "1"})
	write(t, newPath, next, map[string]string{"step": "2"})
	return oldPath, newPath
}

func TestEncodeApplyReproducesNewFile(t *testing.T) {
	dir := t.TempDir()
	oldPath, newPath := models(t, dir)
	want, _ := os.ReadFile(newPath)
	for _, f := range []delta.Format{delta.AstraFlow, delta.Compact} {
		d, out := filepath.Join(dir, f.String()+".delta"), filepath.Join(dir, f.String()+".safetensors")
		est, err := Encode(oldPath, newPath, d, f, 2)
		if err != nil {
			t.Fatal(err)
		}
		if est.Tensors != 7 || est.Delta != 4 || est.Full != 3 || est.Removed != 1 {
			t.Fatalf("%s: stats %+v; want 7 tensors, 4 delta, 3 full (I64, added, reshaped), 1 removed", f, est)
		}
		notes := strings.Join(est.Notes, "\n")
		for _, want := range []string{"removed.bias: removed", "added: sent in full (added)", "reshaped: sent in full (shape changed from [8 8])", "steps: sent in full (I64 elements are not 2 or 4 bytes)"} {
			if !strings.Contains(notes, want) {
				t.Fatalf("%s: notes %q lack %q", f, notes, want)
			}
		}
		ast, err := Apply(oldPath, d, out, 1)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(out)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: rebuilt file (%d bytes) differs from the new file (%d bytes)", f, len(got), len(want))
		}
		if ast.Changed != est.Changed || ast.Elements != est.Elements {
			t.Fatalf("%s: apply stats %+v, encode stats %+v", f, ast, est)
		}
	}
}

// TestForeignHeaderKeptVerbatim: a new file whose header another writer laid out
// (spaces, metadata last) is reproduced byte for byte, not re-rendered.
func TestForeignHeaderKeptVerbatim(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 4))
	a := randBytes(r, 2*300)
	oldPath := filepath.Join(dir, "a.safetensors")
	write(t, oldPath, []tensor{{"w", "BF16", []int64{300}, a}}, nil)
	hdr := []byte(`{"w": {"dtype": "BF16", "shape": [300], "data_offsets": [0, 600]}, "__metadata__": {"format": "pt"}}`)
	file := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	file = append(append(file, hdr...), perturb(r, a, 2, 0.05)...)
	newPath := filepath.Join(dir, "b.safetensors")
	if err := os.WriteFile(newPath, file, 0o644); err != nil {
		t.Fatal(err)
	}
	d, out := filepath.Join(dir, "d"), filepath.Join(dir, "b2.safetensors")
	if _, err := Encode(oldPath, newPath, d, delta.Compact, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(oldPath, d, out, 2); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, file) {
		t.Fatal("rebuilt file differs from the hand-written new file")
	}
}

func TestBadInputsLeaveOutputUntouched(t *testing.T) {
	dir := t.TempDir()
	oldPath, newPath := models(t, dir)
	d := filepath.Join(dir, "d")
	if _, err := Encode(oldPath, newPath, d, delta.AstraFlow, 1); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(d)
	corrupt := func(name string, f func([]byte) []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, f(bytes.Clone(good)), 0o644)
		return p
	}
	// The first tensor record (embed.weight, astraflow) starts after the magic and header.
	hdrLen := 8 + int(binary.LittleEndian.Uint64(good[8:]))
	rec := 8 + hdrLen
	cases := []struct {
		name, base, delta, want string
	}{
		{"wrong base", "", d, `tensor "layer.0.q": rebuilt bytes do not match`},
		{"truncated", oldPath, corrupt("trunc", func(b []byte) []byte { return b[:len(b)-5] }), "magic"},
		{"not a delta", oldPath, oldPath, "not a needle delta file"},
		{"record elem size", oldPath, corrupt("es", func(b []byte) []byte { b[rec+8] = 4; return b }), `tensor "embed.weight": astraflow elem_size is 4`},
		{"record index", oldPath, corrupt("idx", func(b []byte) []byte { b[rec+16+3] = 0x7f; return b }), `tensor "embed.weight"`},
		{"record value", oldPath, corrupt("val", func(b []byte) []byte { b[len(b)-200] ^= 1; return b }), "checksum"},
		{"index json", oldPath, corrupt("js", func(b []byte) []byte {
			i := bytes.LastIndex(b, []byte(`"version":1`))
			b[i+10] = '7'
			return b
		}), "version 7"},
		{"header record", oldPath, corrupt("hdr", func(b []byte) []byte {
			i := bytes.Index(b, []byte(`"step"`))
			b[i+1] = 'x'
			return b
		}), "header record"},
	}
	// A wrong base: the old file with one byte of an unchanged tensor flipped.
	wrong, _ := os.ReadFile(oldPath)
	of, err := safetensors.Open(oldPath)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := of.Tensor("layer.0.q")
	of.Close()
	wrong[8+int(binary.LittleEndian.Uint64(wrong))+int(q.Begin)] ^= 1
	wrongPath := filepath.Join(dir, "wrong.safetensors")
	os.WriteFile(wrongPath, wrong, 0o644)
	cases[0].base = wrongPath
	out := filepath.Join(dir, "out.safetensors")
	for _, c := range cases {
		os.WriteFile(out, []byte("previous"), 0o644)
		_, err := Apply(c.base, c.delta, out, 1)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if got, _ := os.ReadFile(out); string(got) != "previous" {
			t.Errorf("%s: output changed after an error", c.name)
		}
	}
}

// FuzzApply feeds arbitrary delta files to Apply against a fixed base: it must return an
// error or a file, never panic, and never leave an output behind an error.
func FuzzApply(f *testing.F) {
	dir := f.TempDir()
	oldPath, newPath := models(f, dir)
	for _, format := range []delta.Format{delta.AstraFlow, delta.Compact} {
		d := filepath.Join(dir, format.String())
		if _, err := Encode(oldPath, newPath, d, format, 1); err != nil {
			f.Fatal(err)
		}
		good, _ := os.ReadFile(d)
		f.Add(good)
		f.Add(good[:len(good)/2])
	}
	f.Add([]byte(magic + magic))
	f.Fuzz(func(t *testing.T, file []byte) {
		tmp := t.TempDir()
		d, out := filepath.Join(tmp, "d"), filepath.Join(tmp, "out")
		if err := os.WriteFile(d, file, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Apply(oldPath, d, out, 1); err != nil {
			if _, statErr := os.Stat(out); statErr == nil {
				t.Fatalf("output left behind after %v", err)
			}
		}
	})
}
