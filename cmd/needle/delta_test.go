package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"needle/safetensors"
)

// TestDeltaCommand runs `needle delta encode` then `needle delta apply` on two generated
// checkpoints and checks the rebuilt file equals the new one byte for byte.
func TestDeltaCommand(t *testing.T) {
	dir := t.TempDir()
	old := make([]byte, 2*1001)
	for i := range old {
		old[i] = byte(i * 7)
	}
	next := bytes.Clone(old)
	next[10] ^= 1
	next[2000] ^= 0x80
	paths := map[string][]byte{"a.safetensors": old, "b.safetensors": next}
	for name, data := range paths {
		w, err := safetensors.Create(filepath.Join(dir, name), []safetensors.Tensor{{Name: "w", DType: "BF16", Shape: []int64{7, 143}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteTensor("w", data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	a, b, d, b2 := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors"), filepath.Join(dir, "d"), filepath.Join(dir, "b2.safetensors")
	for _, format := range []string{"astraflow", "compact"} {
		if rc := runMain([]string{"delta", "encode", "--old", a, "--new", b, "--out", d, "--format", format}); rc != 0 {
			t.Fatalf("encode --format %s exited %d", format, rc)
		}
		if rc := runMain([]string{"delta", "apply", "--base", a, "--delta", d, "--out", b2, "--threads", "1"}); rc != 0 {
			t.Fatalf("apply exited %d", rc)
		}
		want, _ := os.ReadFile(b)
		if got, _ := os.ReadFile(b2); !bytes.Equal(got, want) {
			t.Fatalf("%s: rebuilt file differs from the new one", format)
		}
	}
	for _, bad := range [][]string{
		{"delta", "encode", "--old", a, "--new", b},
		{"delta", "encode", "--old", a, "--new", b, "--out", d, "--format", "zip"},
		{"delta", "apply", "--base", b2, "--delta", a, "--out", filepath.Join(dir, "x")},
		{"delta", "frobnicate"},
	} {
		if rc := runMain(bad); rc == 0 {
			t.Errorf("%v exited 0", bad)
		}
	}
}
