package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"needle/kernels/trainer/delta"
	"needle/weights/store"
	"needle/weights/wire"
)

// compareKernels measures, on the two versions' halves (old, cur), the sender's encode job
// (records only, as receivers wait for them; best of 3 after a warm-up) and the receivers' apply of its records into a copy of old
// (checked byte for byte against cur), then AstraFlow's NumPy encode and scatter on the same
// files (bench/weights_astraflow.py).
func compareKernels(rep *weightsReport, oldPath, curPath, work string, o WeightsOptions) error {
	return withMapping(oldPath, false, func(old []byte) error {
		return withMapping(curPath, false, func(cur []byte) error {
			l, err := wire.ChunkMapOf(cur, wire.DefaultChunk)
			if err != nil {
				return err
			}
			lo, err := wire.ChunkMapOf(old, wire.DefaultChunk)
			if err != nil {
				return err
			}
			var frames [][]byte
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
			scratch := filepath.Join(work, "apply.safetensors")
			if err := os.WriteFile(scratch, old, 0o644); err != nil {
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
				if !bytes.Equal(base, cur) {
					return fmt.Errorf("apply did not rebuild version 2")
				}
				return nil
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
		})
	})
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
	cmd := exec.Command(o.Python, o.Script, "--old", oldPath, "--new", curPath, "--base", scratch, "--header", fmt.Sprint(header))
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
