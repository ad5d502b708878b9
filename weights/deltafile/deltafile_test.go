package deltafile

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"needle/safetensors"
	"needle/weights/wire"
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
// 0-100% change, an odd size, an I64 tensor (compared as 4-byte words), a removed, an added
// and a reshaped tensor, and changed metadata.
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
	for _, f := range []wire.Format{wire.AstraFlow, wire.Packed} {
		d, out := filepath.Join(dir, f.String()+".delta"), filepath.Join(dir, f.String()+".safetensors")
		est, err := Encode(oldPath, newPath, d, f, 2)
		if err != nil {
			t.Fatal(err)
		}
		if est.Tensors != 7 || est.Delta != 5 || est.Full != 2 || est.Removed != 1 {
			t.Fatalf("%s: stats %+v; want 7 tensors, 5 delta (the I64 one too), 2 full (added, reshaped), 1 removed", f, est)
		}
		notes := strings.Join(est.Notes, "\n")
		for _, want := range []string{"removed.bias: removed", "added: sent in full (added)", "reshaped: sent in full (shape changed from [8 8])"} {
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
		if ast.Changed != est.Changed || ast.Elements != est.Elements || ast.Records != est.Records || ast.DeltaBytes != est.DeltaBytes || est.Changed == 0 {
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
	if _, err := Encode(oldPath, newPath, d, wire.Packed, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(oldPath, d, out, 2); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, file) {
		t.Fatal("rebuilt file differs from the hand-written new file")
	}
}

// frames returns the offsets of the frames of a delta file after its magic.
func frames(t *testing.T, b []byte) []int {
	t.Helper()
	var at []int
	for pos := len(deltaMagic); pos < len(b); {
		_, _, n, err := wire.ParseFrame(b[pos:])
		if err != nil {
			t.Fatal(err)
		}
		at = append(at, pos)
		pos += n
	}
	return at
}

// reframe changes the payload of the frame at pos with f and writes its check again: a frame
// that is whole but says something else.
func reframe(b []byte, pos int, f func(payload []byte)) []byte {
	k, p, _, _ := wire.ParseFrame(b[pos:])
	f(p)
	wire.PutHeader(b[pos:pos+wire.HeaderLen], k, p)
	return b
}

// TestBadInputsLeaveOutputUntouched: a wrong base, a damaged, cut or forged delta file are
// errors that say what is wrong, and the output keeps what it held.
func TestBadInputsLeaveOutputUntouched(t *testing.T) {
	dir := t.TempDir()
	oldPath, newPath := models(t, dir)
	d := filepath.Join(dir, "d")
	if _, err := Encode(oldPath, newPath, d, wire.AstraFlow, 1); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(d)
	at := frames(t, good)
	step, rec, end := at[0], at[1], at[len(at)-1] // the first record: embed.weight's (astraflow)
	corrupt := func(name string, f func([]byte) []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, f(bytes.Clone(good)), 0o644)
		return p
	}
	body := wire.HeaderLen + wire.RecordHeaderLen // a record's body in its frame
	cases := []struct {
		name, base, delta, want string
	}{
		{"wrong base", "", d, `tensor "layer.0.q" chunk 2: rebuilt bytes differ`},
		{"base lacks a tensor", "", d, `tensor "embed.weight" chunk 0: ` + filepath.Join(dir, "other.safetensors") + " has no tensor of that name"},
		{"truncated", oldPath, corrupt("trunc", func(b []byte) []byte { return b[:len(b)-5] }), "unexpected EOF"},
		{"cut after a record", oldPath, corrupt("cut", func(b []byte) []byte { return b[:at[2]] }), "before its end frame"},
		{"not a delta", oldPath, oldPath, "not a needle delta file"},
		{"earlier format", oldPath, corrupt("v1", func(b []byte) []byte { return append([]byte("NDLTFILE"), b[8:]...) }), "earlier needle"},
		{"damaged record", oldPath, corrupt("dmg", func(b []byte) []byte { b[rec+body+20] ^= 1; return b }), "frame check failed"},
		{"damaged header", oldPath, corrupt("hdr", func(b []byte) []byte { b[step+wire.HeaderLen+60] ^= 1; return b }), "frame check failed"},
		{"record elem size", oldPath, corrupt("es", func(b []byte) []byte {
			return reframe(b, rec, func(p []byte) { p[5] = 4 })
		}), `tensor "embed.weight" chunk 0: delta of 4-byte elements`},
		{"record index", oldPath, corrupt("idx", func(b []byte) []byte {
			return reframe(b, rec, func(p []byte) { binary.LittleEndian.PutUint32(p[wire.RecordHeaderLen+16:], 1<<30) })
		}), `tensor "embed.weight" chunk 0`},
		{"record value", oldPath, corrupt("val", func(b []byte) []byte {
			return reframe(b, rec, func(p []byte) { p[len(p)-1] ^= 1 })
		}), `tensor "embed.weight" chunk 0: rebuilt bytes differ`},
		{"records out of order", oldPath, corrupt("order", func(b []byte) []byte {
			return reframe(b, at[2], func(p []byte) { binary.LittleEndian.PutUint32(p, 0) })
		}), "after chunk 0"},
		{"end count", oldPath, corrupt("count", func(b []byte) []byte {
			return append(b[:end], wire.AppendFrame(nil, wire.KindEnd, wire.Marshal(wire.End{Records: 1}))...)
		}), "end frame counts 1"},
		{"trailing bytes", oldPath, corrupt("trail", func(b []byte) []byte { return append(b, 0) }), "bytes after its end frame"},
		{"another step", oldPath, corrupt("step", func(b []byte) []byte {
			k, p, n, _ := wire.ParseFrame(b[step:])
			var s wire.Step
			wire.Unmarshal(k, wire.KindStep, p, &s)
			s.From = 0
			return append(append(b[:step:step], wire.AppendFrame(nil, wire.KindStep, wire.Marshal(s))...), b[step+n:]...)
		}), "step 0 -> 2"},
	}
	// A wrong base: the old file with one byte of an unchanged tensor flipped.
	wrong, _ := os.ReadFile(oldPath)
	of, err := safetensors.Open(oldPath)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := of.Tensor("layer.0.q")
	of.Close()
	wrong[8+int(binary.LittleEndian.Uint64(wrong))+int(q.Begin)+2*1000-1] ^= 1
	wrongPath := filepath.Join(dir, "wrong.safetensors")
	os.WriteFile(wrongPath, wrong, 0o644)
	cases[0].base = wrongPath
	// A base that lacks the tensors the delta diffs.
	cases[1].base = filepath.Join(dir, "other.safetensors")
	write(t, cases[1].base, []tensor{{"other", "F32", []int64{1}, make([]byte, 4)}}, nil)
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

// FuzzApply feeds arbitrary delta files to Apply against a fixed base: it must return
// an error or a file, never panic, and never leave an output behind an error.
func FuzzApply(f *testing.F) {
	dir := f.TempDir()
	oldPath, newPath := models(f, dir)
	for _, format := range []wire.Format{wire.AstraFlow, wire.Packed} {
		d := filepath.Join(dir, format.String())
		if _, err := Encode(oldPath, newPath, d, format, 1); err != nil {
			f.Fatal(err)
		}
		good, _ := os.ReadFile(d)
		f.Add(good)
		f.Add(good[:len(good)/2])
	}
	f.Add([]byte(deltaMagic + deltaMagic))
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
