package differ

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"needle/kernels/trainer/delta"
	"needle/testkit/weightstest"
	"needle/weights/layout"
	"needle/weights/patch"
	"needle/weights/store"
	"needle/weights/wire"
)

var tensors = []weightstest.Tensor{
	weightstest.T("embed", "BF16", 300, 64),
	weightstest.T("norm", "F32", 64),
	weightstest.T("ids", "I64", 10),
	weightstest.T("mask", "U8", 33),
	weightstest.T("w", "BF16", 64, 64),
}

func snap(t testing.TB, img []byte, v uint64) *store.Snapshot {
	t.Helper()
	hdr := 8 + int(binary.LittleEndian.Uint64(img))
	l, err := layout.New(img[:hdr], int64(len(img)), 4096)
	if err != nil {
		t.Fatal(err)
	}
	return store.NewSnapshot("run", v, l, img, nil)
}

// rebuild applies step's records to old (rebased onto the new layout) and returns the file.
func rebuild(t *testing.T, old, cur *store.Snapshot, step *store.Step) []byte {
	t.Helper()
	out := make([]byte, cur.Layout.Size)
	patch.Rebase(out, cur.Layout, old.Data, old.Layout)
	target := patch.NewTarget(cur.Layout, out, old.Layout)
	var scratch delta.Sparse
	for i := 0; ; i++ {
		f, err := step.Frame(context.Background(), i)
		if err != nil {
			t.Fatal(err)
		}
		if f == nil {
			break
		}
		k, p, _, err := wire.ReadFrame(bufio.NewReader(bytes.NewReader(f)), nil)
		if err != nil || k != wire.KindRecord {
			t.Fatalf("frame %d: %v %v", i, k, err)
		}
		rec, err := wire.ParseRecord(p)
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

func TestRoundTrip(t *testing.T) {
	v1, _ := weightstest.Image(tensors, 1)
	v2 := weightstest.Step(v1, 0.01, 2)
	v2[len(v2)-1] ^= 1 // the last byte of "w": the mask stays, a bf16 element changes
	// v3: "norm" becomes bf16, "w" changes shape, "extra" is added, "mask" removed.
	changed := []weightstest.Tensor{tensors[0], weightstest.T("norm", "BF16", 64), tensors[2], weightstest.T("w", "BF16", 32, 128), weightstest.T("extra", "F32", 5)}
	v3, _ := weightstest.Image(changed, 3)
	for _, f := range []delta.Format{delta.Compact, delta.AstraFlow} {
		for _, c := range []struct {
			name     string
			old, cur []byte
		}{{"step", v1, v2}, {"layout change", v2, v3}, {"no change", v2, v2}} {
			old, cur := snap(t, c.old, 1), snap(t, c.cur, 2)
			step := store.NewStep(1, 2, cur.Layout)
			st, err := Run(old, cur, step, f, 3)
			if err != nil {
				t.Fatalf("%s %s: %v", f, c.name, err)
			}
			step.Finish(nil, nil)
			if got := rebuild(t, old, cur, step); !bytes.Equal(got, c.cur) {
				t.Fatalf("%s %s: rebuilt file differs", f, c.name)
			}
			frames, _, _, _ := step.Progress()
			t.Logf("%s %s: %d of %d elements changed, %d raw bytes, %d records, %d wire bytes (astraflow %d)",
				f, c.name, st.Changed, st.Elements, st.RawBytes, frames, st.WireBytes, st.AstraFlowBytes)
			if c.name == "no change" && (frames != 0 || st.Changed != 0) {
				t.Fatalf("an unchanged version has %d records", frames)
			}
		}
	}
}
