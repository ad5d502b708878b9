package wire

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"needle/kernels/trainer/delta"
	"needle/safetensors/synth"
)

// TestApplyRejects: records that do not fit their chunk are errors and leave the file as it was.
func TestApplyRejects(t *testing.T) {
	oldImg, oh := synth.Image([]synth.Tensor{synth.T("w", "BF16", 16), synth.T("b", "F32", 4)}, 1)
	newImg, nh := synth.Image([]synth.Tensor{synth.T("w", "BF16", 16), synth.T("b", "BF16", 8)}, 2)
	base, _ := NewChunkMap(oldImg[:oh], int64(len(oldImg)), 16)
	l, _ := NewChunkMap(newImg[:nh], int64(len(newImg)), 16)
	data := make([]byte, l.Size)
	Rebase(data, l, oldImg, base)
	before := bytes.Clone(data)
	tgt := NewTarget(l, data, base)
	var sp delta.Sparse
	if err := delta.Encode(&sp, make([]byte, 16), bytes.Repeat([]byte{1}, 16), 2, 1); err != nil {
		t.Fatal(err)
	}
	rec, _ := AppendRecord(nil, AstraFlow, &sp, nil, bytes.Repeat([]byte{1}, 16), nil)
	for _, c := range []struct {
		rec  Record
		want string
	}{
		{Record{Chunk: 9, Op: OpRaw}, "chunk map has"},
		{Record{Chunk: 0, Op: OpRaw, Body: make([]byte, 15)}, "raw record of 15 bytes"},
		{Record{Chunk: 2, Op: OpAstraFlow, ElemSize: 2, Body: rec}, "no base"},
		{Record{Chunk: 0, Op: OpAstraFlow, ElemSize: 4, Body: rec}, "compared as 2"},
		{Record{Chunk: 0, Op: OpPacked, ElemSize: 2, Body: rec}, "packed record"},
	} {
		if err := tgt.Apply(c.rec, &sp); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("chunk %d op %d: %v, want %q", c.rec.Chunk, c.rec.Op, err, c.want)
		}
	}
	if err := tgt.ApplyTo(make([]byte, 15), Record{Chunk: 0, Op: OpRaw, Body: make([]byte, 16)}, &sp); err == nil || !strings.Contains(err.Error(), "15 bytes given for a 16-byte chunk") {
		t.Errorf("ApplyTo into a short buffer: %v", err)
	}
	if !bytes.Equal(data, before) {
		t.Fatal("a rejected record changed the file")
	}
	apart := bytes.Clone(before[nh : nh+16])
	if err := tgt.ApplyTo(apart, Record{Chunk: 0, Op: OpAstraFlow, ElemSize: 2, Body: rec}, &sp); err != nil || !bytes.Equal(apart, bytes.Repeat([]byte{1}, 16)) || !bytes.Equal(data, before) {
		t.Fatalf("ApplyTo: %v, chunk % x; the file must stay as it was", err, apart)
	}
	if err := tgt.Complete(); err == nil {
		t.Fatal("Complete with the new tensor's chunk missing")
	}
	if err := tgt.Apply(Record{Chunk: 2, Op: OpRaw, Body: newImg[nh+32 : nh+48]}, &sp); err != nil {
		t.Fatal(err)
	}
	if err := tgt.Complete(); err != nil {
		t.Fatal(err)
	}
	full := NewTarget(l, make([]byte, l.Size), nil)
	full.ReceivedBefore(2)
	if err := full.Complete(); err == nil || !strings.Contains(err.Error(), "chunk 2") {
		t.Fatalf("full step missing chunk 2: %v", err)
	}
}

// TestApplyRawThroughFile: with File set, raw records go to the file by offset (Data untouched),
// a raw record of the wrong size writes nothing, and delta records still apply to Data.
func TestApplyRawThroughFile(t *testing.T) {
	img, h := synth.Image([]synth.Tensor{synth.T("w", "BF16", 16), synth.T("b", "F32", 4)}, 3)
	l, _ := NewChunkMap(img[:h], int64(len(img)), 16)
	f, err := os.Create(filepath.Join(t.TempDir(), "next"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(l.Size); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, l.Size)
	tgt := NewTarget(l, data, nil)
	tgt.File = f
	var sp delta.Sparse
	_, off, n := l.Span(1)
	if err := tgt.Apply(Record{Chunk: 1, Op: OpRaw, Body: img[off : off+n-1]}, &sp); err == nil || !strings.Contains(err.Error(), "raw record of") {
		t.Fatalf("short raw record: %v", err)
	}
	for i := range l.Chunks() {
		_, off, n := l.Span(i)
		if err := tgt.Apply(Record{Chunk: i, Op: OpRaw, Body: img[off : off+n]}, &sp); err != nil {
			t.Fatal(err)
		}
	}
	if err := tgt.Complete(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[h:], img[h:]) || !bytes.Equal(data, make([]byte, l.Size)) {
		t.Fatal("raw records did not go to the file alone")
	}
}
