package wire

import (
	"bytes"
	"encoding/binary"
	"testing"

	"needle/kernels/trainer/delta"
	"needle/safetensors/synth"
)

var tensors = []synth.Tensor{
	synth.T("embed", "BF16", 300, 64),
	synth.T("norm", "F32", 64),
	synth.T("ids", "I64", 10),
	synth.T("mask", "U8", 33),
	synth.T("w", "BF16", 64, 64),
}

func image(t testing.TB, img []byte) Image {
	t.Helper()
	hdr := 8 + int(binary.LittleEndian.Uint64(img))
	l, err := NewChunkMap(img[:hdr], int64(len(img)), 4096)
	if err != nil {
		t.Fatal(err)
	}
	return Image{l, img}
}

// encodeFrames runs EncodeStep and returns the frames it emitted.
func encodeFrames(t testing.TB, old, cur Image, f Format, threads int, hashes []uint64) ([][]byte, StepStats) {
	t.Helper()
	var frames [][]byte
	st, err := EncodeStep(old, cur, f, threads, hashes, func(fr []byte) error {
		frames = append(frames, fr)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return frames, st
}

// rebuild applies frames to old (rebased onto the new chunk map) and returns the file.
func rebuild(t *testing.T, old, cur Image, frames [][]byte) []byte {
	t.Helper()
	out := make([]byte, cur.ChunkMap.Size)
	Rebase(out, cur.ChunkMap, old.Data, old.ChunkMap)
	target := NewTarget(cur.ChunkMap, out, old.ChunkMap)
	var scratch delta.Sparse
	for i, f := range frames {
		k, p, n, err := ParseFrame(f)
		if err != nil || k != KindRecord || n != len(f) {
			t.Fatalf("frame %d: %v %v", i, k, err)
		}
		rec, err := ParseRecord(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := target.Apply(rec, &scratch); err != nil {
			t.Fatal(err)
		}
	}
	if err := target.Complete(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEncodeStep: a step rebuilds the new version from the old for every format, with a
// change of dtype, of shape, a tensor added and one removed, and no change at all; the
// manifest it fills is the chunk map's hash of the new version.
func TestEncodeStep(t *testing.T) {
	v1, _ := synth.Image(tensors, 1)
	v2 := synth.Step(v1, 0.01, 2)
	v2[len(v2)-1] ^= 1 // the last byte of "w": the mask stays, a bf16 element changes
	// v3: "norm" becomes bf16, "w" changes shape, "extra" is added, "mask" removed.
	changed := []synth.Tensor{tensors[0], synth.T("norm", "BF16", 64), tensors[2], synth.T("w", "BF16", 32, 128), synth.T("extra", "F32", 5)}
	v3, _ := synth.Image(changed, 3)
	for _, f := range []Format{Packed, AstraFlow} {
		for _, c := range []struct {
			name     string
			old, cur []byte
		}{{"step", v1, v2}, {"chunk map change", v2, v3}, {"no change", v2, v2}} {
			old, cur := image(t, c.old), image(t, c.cur)
			hashes := make([]uint64, cur.ChunkMap.Chunks())
			frames, st := encodeFrames(t, old, cur, f, 3, hashes)
			if got := rebuild(t, old, cur, frames); !bytes.Equal(got, c.cur) {
				t.Fatalf("%s %s: rebuilt file differs", f, c.name)
			}
			for i, h := range cur.ChunkMap.Hash(cur.Data, 1) {
				if hashes[i] != h {
					t.Fatalf("%s %s: manifest hash %d is %x, want %x", f, c.name, i, hashes[i], h)
				}
			}
			t.Logf("%s %s: %d of %d elements changed, %d raw bytes, %d records, %d wire bytes (astraflow %d)",
				f, c.name, st.Changed, st.Elements, st.RawBytes, len(frames), st.WireBytes, st.AstraFlowBytes)
			if c.name == "no change" && (len(frames) != 0 || st.Changed != 0) {
				t.Fatalf("an unchanged version has %d records", len(frames))
			}
		}
	}
	old, cur := image(t, v1), image(t, v2)
	stop := bytes.ErrTooLarge
	calls := 0
	if _, err := EncodeStep(old, cur, Packed, 2, nil, func([]byte) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("emit failing: %v after %d calls, want its error after one", err, calls)
	}
	if _, err := EncodeStep(old, cur, Packed, 2, make([]uint64, 1), nil); err == nil {
		t.Fatal("a manifest of the wrong length was accepted")
	}
}
