package wire

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"needle/testkit/testenv"
	"needle/testkit/weightstest"
)

// astraflowPy builds a delta record the way AstraFlow's sender does
// (docs/en/architecture/delta-weight-transfer.md): NumPy diff of the uint16/uint32 views,
// u32 indices (u64 past 2^32-1 elements or when forced), header struct "<QHHi".
const astraflowPy = `
import struct, sys
import numpy as np
old_path, new_path, es, force64, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5]
dt = np.uint16 if es == 2 else np.uint32
old, new = np.fromfile(old_path, dtype=dt), np.fromfile(new_path, dtype=dt)
use64 = force64 or new.size > 2**32 - 1
idx = np.nonzero(new != old)[0].astype(np.uint64 if use64 else np.uint32)
with open(out, "wb") as f:
    f.write(struct.pack("<QHHi", idx.size, es, 1 if use64 else 0, 0))
    f.write(idx.tobytes())
    f.write(new[idx].tobytes())
`

// TestAstraFlowRecordMatchesPython: our AstraFlow records equal, byte for byte, the ones
// AstraFlow's NumPy code path produces from the same tensors; and we apply theirs.
func TestAstraFlowRecordMatchesPython(t *testing.T) {
	py := testenv.Python(t)
	dir := t.TempDir()
	for _, c := range []struct {
		es      int
		frac    float64
		force64 bool
	}{{2, 0.01, false}, {4, 0.3, false}, {2, 1, false}, {2, 0.05, true}} {
		oldBits, newBits := weightstest.Pair(10007, c.es, c.frac, 21)
		oldPath, newPath, out := filepath.Join(dir, "old"), filepath.Join(dir, "new"), filepath.Join(dir, "rec")
		os.WriteFile(oldPath, oldBits, 0o644)
		os.WriteFile(newPath, newBits, 0o644)
		force := "0"
		if c.force64 {
			force = "1"
		}
		cmd := exec.Command(py, "-c", astraflowPy, oldPath, newPath, strconv.Itoa(c.es), force, out)
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("python: %v\n%s", err, msg)
		}
		theirs, _ := os.ReadFile(out)
		if !c.force64 {
			if _, ours := encodeRecord(t, AstraFlow, oldBits, newBits, c.es); !bytes.Equal(ours, theirs) {
				t.Fatalf("es=%d frac=%v: our record (%d bytes) differs from AstraFlow's (%d bytes)", c.es, c.frac, len(ours), len(theirs))
			}
		}
		base := bytes.Clone(oldBits)
		if _, err := ApplyRecord(base, c.es, AstraFlow, theirs, nil, 1); err != nil || !bytes.Equal(base, newBits) {
			t.Fatalf("es=%d frac=%v force64=%v: applying AstraFlow's record: %v", c.es, c.frac, c.force64, err)
		}
	}
}
