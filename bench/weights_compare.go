package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"needle/internal/mapfile"
	"needle/kernels/trainer/delta"
	"needle/weights/store"
	"needle/weights/wire"
)

// compareKernels measures, on the two versions' halves (old, cur), the sender's encode job
// (records only, as receivers wait for them; best of 3 after a warm-up) and the receivers' apply of its records into a copy of old
// (checked byte for byte against cur), then AstraFlow's NumPy encode and scatter on the same
// files (bench/weights_astraflow.py). At most two files' pages are mapped at a time: both
// versions while encoding, the copy while applying.
func compareKernels(rep *weightsReport, oldPath, curPath, work string, o WeightsOptions) error {
	var frames [][]byte
	var l, lo *wire.ChunkMap
	err := withMapping(oldPath, false, func(old []byte) error {
		return withMapping(curPath, false, func(cur []byte) error {
			var err error
			if l, err = wire.ChunkMapOf(cur, wire.DefaultChunk); err != nil {
				return err
			}
			if lo, err = wire.ChunkMapOf(old, wire.DefaultChunk); err != nil {
				return err
			}
			encode := func(int) error { // as the sender's job runs it: into a store.Step
				st := store.NewStep(1, 2, l)
				_, err := wire.EncodeStep(wire.Image{ChunkMap: lo, Data: old}, wire.Image{ChunkMap: l, Data: cur}, o.Format, o.Threads, nil, func(frame []byte) error {
					st.Append(frame)
					return nil
				})
				if err != nil {
					return err
				}
				n, _, _, _ := st.Progress()
				frames = frames[:0]
				for i := range n {
					f, _ := st.Frame(context.Background(), i)
					frames = append(frames, f)
				}
				return nil
			}
			wall, _, err := bestRun(encode, o.Threads, 0)
			if err != nil {
				return err
			}
			rep.EncodeSeconds = wall.Seconds()
			rep.EncodeOfBW = 2 * float64(l.Size) / wall.Seconds() / (rep.ReadGBps * 1e9)
			return nil
		})
	})
	if err != nil {
		return err
	}
	scratch := filepath.Join(work, "apply.safetensors")
	if err := copyFile(scratch, oldPath); err != nil {
		return err
	}
	defer os.Remove(scratch)
	err = withMapping(scratch, true, func(base []byte) error {
		t := wire.NewTarget(l, base, lo)
		wall, _, err := bestRun(func(threads int) error { return applyFrames(t, frames, threads) }, o.Threads, 0)
		if err != nil {
			return err
		}
		rep.ApplySeconds = wall.Seconds()
		return sameAsFile(base, curPath)
	})
	if err != nil || o.Python == "" {
		return err
	}
	np, err := runNumPy(o, oldPath, curPath, scratch, len(l.Header))
	if err != nil {
		return err
	}
	rep.NumPy = np
	rep.EncodeSpeedup = np.EncodeSeconds / rep.EncodeSeconds
	rep.ApplySpeedup = np.ApplySeconds / rep.ApplySeconds
	if np.Bytes != rep.AstraFlow {
		return fmt.Errorf("AstraFlow's chunkMap: %d bytes in NumPy, %d counted by the sender", np.Bytes, rep.AstraFlow)
	}
	return nil
}

// copyFile copies src to dst (mapfile.Copy: the pages of src mapped, dst written with pwrite).
func copyFile(dst, src string) error {
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := mapfile.Copy(out, src); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// sameAsFile checks that data holds the bytes of the file at path, read in pieces.
func sameAsFile(data []byte, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 8<<20)
	for off := 0; off < len(data); off += len(buf) {
		n := min(len(buf), len(data)-off)
		if _, err := io.ReadFull(f, buf[:n]); err != nil {
			return err
		}
		if !bytes.Equal(buf[:n], data[off:off+n]) {
			return fmt.Errorf("apply did not rebuild version 2 (bytes %d-%d differ)", off, off+n)
		}
	}
	return nil
}

// applyFrames applies record frames to t on threads goroutines.
func applyFrames(t *wire.Target, frames [][]byte, threads int) error {
	var wg sync.WaitGroup
	errs := make([]error, threads)
	for k := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sp delta.Sparse
			for i := k; i < len(frames) && errs[k] == nil; i += threads {
				rec, err := wire.ParseRecord(frames[i][wire.HeaderLen:])
				if err == nil {
					err = t.Apply(rec, &sp)
				}
				errs[k] = err
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// runNumPy runs the AstraFlow baseline on the files and reads its JSON line.
func runNumPy(o WeightsOptions, oldPath, curPath, scratch string, header int) (*numpyResult, error) {
	args := []string{o.Script, "--old", oldPath, "--new", curPath, "--base", scratch, "--header", fmt.Sprint(header)}
	if o.AstraFlow != "" {
		args = append(args, "--astraflow", o.AstraFlow)
	}
	cmd := exec.Command(o.Python, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Script, err)
	}
	var r numpyResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.EncodeSeconds > 0 {
			return &r, nil
		}
	}
	return nil, fmt.Errorf("%s printed no result:\n%s", o.Script, out)
}
