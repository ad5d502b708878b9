package main

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"needle/kernels/bert/nn"
	"needle/testkit/cudatest"
	"needle/testkit/testenv"
)

// captureStdout runs f with os.Stdout redirected to a file and returns what it wrote.
func captureStdout(t *testing.T, f func() error) (string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stdout")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = out
	ferr := f()
	os.Stdout = saved
	out.Close()
	b, _ := os.ReadFile(path)
	return string(b), ferr
}

func TestEncodeJSONLinesAndNpyAgree(t *testing.T) {
	model := testenv.MiniLMDir(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	texts := []string{"hello world", "", "北京是中华人民共和国的首都", strings.Repeat("long passage ", 300)}
	var sb strings.Builder
	for _, s := range texts {
		b, _ := json.Marshal(s)
		sb.Write(append(b, '\n'))
	}
	os.WriteFile(in, []byte(sb.String()), 0o644)
	stdout, err := captureStdout(t, func() error { return runEncode([]string{"--model", model, "--in", in}) })
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%d output lines for %d texts", len(lines), len(texts))
	}
	npy := filepath.Join(dir, "out.npy")
	if err := runEncode([]string{"--model", model, "--in", in, "--npy", npy}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(npy)
	if err != nil {
		t.Fatal(err)
	}
	header := string(raw[10:128])
	if !strings.HasPrefix(string(raw), "\x93NUMPY\x01\x00") || !strings.Contains(header, "'shape': (4, 384)") || len(raw) != 128+4*384*4 {
		t.Fatalf("npy header %q, %d bytes", header, len(raw))
	}
	for i, line := range lines {
		var v []float32
		if err := json.Unmarshal([]byte(line), &v); err != nil || len(v) != 384 {
			t.Fatalf("line %d: %v (%d floats)", i+1, err, len(v))
		}
		norm := 0.0
		for j, x := range v {
			y := math.Float32frombits(binary.LittleEndian.Uint32(raw[128+4*(i*384+j):]))
			if x != y {
				t.Fatalf("text %d [%d]: JSON %g, npy %g", i, j, x, y)
			}
			norm += float64(x) * float64(x)
		}
		if math.Abs(norm-1) > 1e-5 {
			t.Errorf("text %d: squared norm %g", i, norm)
		}
	}
}

// --gpu without a GPU encodes on the CPU (the same vectors); --gpu=require fails.
func TestEncodeWithoutGPUFallsBack(t *testing.T) {
	cudatest.WithoutDevice(t)
	model := testenv.MiniLMDir(t)
	in := filepath.Join(t.TempDir(), "in.jsonl")
	os.WriteFile(in, []byte("\"hello world\"\n\"\"\n"), 0o644)
	want, err := captureStdout(t, func() error { return runEncode([]string{"--model", model, "--in", in}) })
	if err != nil {
		t.Fatal(err)
	}
	got, err := captureStdout(t, func() error { return runEncode([]string{"--model", model, "--in", in, "--gpu"}) })
	if err != nil || got != want {
		t.Errorf("--gpu without a GPU: %v, output differs from the CPU's: %v", err, got != want)
	}
	err = runEncode([]string{"--model", model, "--in", in, "--gpu=require"})
	if err == nil || !strings.Contains(err.Error(), "GPU required: ") {
		t.Errorf("--gpu=require without a GPU: %v, want an error", err)
	}
}

func TestEncodeBadInput(t *testing.T) {
	model := testenv.MiniLMDir(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	os.WriteFile(in, []byte("\"ok\"\n{\"contents\": 1}\n"), 0o644)
	npy := filepath.Join(dir, "out.npy")
	err := runEncode([]string{"--model", model, "--in", in, "--npy", npy})
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("err = %v, want one naming line 2", err)
	}
	if _, serr := os.Stat(npy); !os.IsNotExist(serr) {
		t.Errorf("a failed encode left %s behind", npy)
	}
	bad := [][]string{{}, {"--model", model, "--batch-size", "0"}, {"--model", dir}, {"--model", model, "--max-length", "1000"},
		{"--model", model, "--precision", "fp32"}}
	if ops, _ := nn.Selected(); !ops.HasBF16() { // a precision the CPU cannot run
		bad = append(bad, []string{"--model", model, "--precision", "bf16"})
	}
	for _, args := range bad {
		if err := runEncode(args); err == nil {
			t.Errorf("encode %v succeeded", args)
		}
	}
}
