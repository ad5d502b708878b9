// Package deltafile is the delta file of `needle delta encode|apply` (docs/delta.md): one step of
// the weights protocol at rest, written and read by the code the weights daemons use (wire).
package deltafile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"

	"needle/internal/atomicfile"
	"needle/internal/mapfile"
	"needle/internal/writer"
	"needle/kernels/trainer/delta"
	"needle/weights/wire"
)

// A delta file (`needle delta`) is one step of the weights protocol at rest: the records that
// turn an old safetensors file into a new one, made by wire.EncodeStep as a sender makes them
// and applied by wire.Target as a receiver applies them. All integers little-endian:
//
//	"NDLTSTEP"          8-byte magic
//	frame KindStep      wire.Step: From 1 (the old file) To 2 (the new one), the new file's size,
//	                    chunk size and safetensors header (verbatim: apply rebuilds it byte for byte)
//	frames KindRecord   one per chunk of the new file that differs from the old file's bytes of the
//	                    same tensor (same name, dtype and shape), in chunk order: its raw bytes when
//	                    the old file has no such tensor or its elements are 1 byte, else its delta
//	                    (2-byte dtypes compared as 2-byte words, 4- and 8-byte ones as 4-byte words)
//	frame KindEnd       wire.End: the record count and the new file's manifest (xxh64 per chunk)
//
// Every frame carries an xxh64 of itself, so a damaged byte is an error before anything is
// applied; apply compares each rebuilt chunk with the manifest, so a wrong base file is an
// error naming the tensor and chunk, never a silently wrong output.
const deltaMagic = "NDLTSTEP"

// deltaMagicV1 begins a delta file of the first format (one record per tensor, a CRC-32C
// each), which apply refuses with an error that says so (encode it again from the two
// checkpoints) rather than calling it no delta file.
const deltaMagicV1 = "NDLTFILE"

// deltaStep is the step a delta file holds: the old file is version 1, the new one version 2.
var deltaStep = wire.StepInfo{From: 1, To: 2}

// Stats summarizes one encode or apply of a delta file.
type Stats struct {
	Tensors, Delta, Full, Removed int      // the new file's tensors, with a base in the old file or not; the old file's it lacks
	Notes                         []string // one line per tensor sent in full or removed, and why
	Elements, Changed             int64    // elements compared as deltas (8-byte ones as two 4-byte words) and changed
	Records                       int      // records in the delta file (changed chunks)
	TensorBytes, DeltaBytes       int64    // the new file's tensor bytes; the delta file's size
}

// describe fills the counts that follow from the two chunk maps.
func (st *Stats) describe(cur, old *wire.ChunkMap) {
	why, removed := cur.Unmatched(old)
	st.Tensors, st.Removed = len(cur.Tensors), len(removed)
	for i, t := range cur.Tensors {
		if reason, full := why[t.Name]; full {
			st.Full++
			st.Notes = append(st.Notes, fmt.Sprintf("%s: sent in full (%s)", t.Name, reason))
			continue
		}
		st.Delta++
		if es := cur.DeltaElem(i); es > 0 {
			st.Elements += (t.End - t.Begin) / int64(es)
		}
	}
	for _, name := range removed {
		st.Notes = append(st.Notes, name+": removed (not in the new file)")
	}
	st.TensorBytes = cur.Size - int64(len(cur.Header))
}

// mapImage maps the safetensors file at path read-only, cut into chunk-byte chunks, its page
// tables filled up front with populate.
func mapImage(path string, chunk int64, populate bool) (wire.Image, func(), error) {
	data, release, err := mapfile.Map(path, false, populate)
	if err != nil {
		return wire.Image{}, nil, err
	}
	l, err := wire.ChunkMapOf(data, chunk)
	if err != nil {
		release()
		return wire.Image{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	return wire.Image{ChunkMap: l, Data: data}, release, nil
}

// Encode writes the delta file that turns oldPath into newPath to outPath (atomically),
// with delta records of format f, encoding on threads goroutines.
func Encode(oldPath, newPath, outPath string, f wire.Format, threads int) (Stats, error) {
	var st Stats
	old, releaseOld, err := mapImage(oldPath, wire.DefaultChunk, true) // every page is read
	if err != nil {
		return st, err
	}
	defer releaseOld()
	cur, releaseCur, err := mapImage(newPath, wire.DefaultChunk, true)
	if err != nil {
		return st, err
	}
	defer releaseCur()
	l := cur.ChunkMap
	manifest := make([]uint64, l.Chunks())
	err = atomicfile.Create(outPath, func(out *os.File) error {
		buf := bufio.NewWriterSize(out, 4<<20)
		w := &writer.Counting{W: buf}
		w.Write([]byte(deltaMagic))
		w.Write(wire.AppendFrame(nil, wire.KindStep, wire.Marshal(wire.Step{StepInfo: deltaStep, Size: l.Size, Chunk: l.Chunk, Header: l.Header})))
		ss, err := wire.EncodeStep(old, cur, f, threads, manifest, func(frame []byte) error {
			_, err := w.Write(frame)
			return err
		})
		if err != nil {
			return err
		}
		w.Write(wire.AppendFrame(nil, wire.KindEnd, wire.Marshal(wire.End{Records: ss.Records, Manifest: manifest})))
		st.Changed, st.Records, st.DeltaBytes = ss.Changed, ss.Records, w.N
		if w.Err != nil {
			return w.Err
		}
		return buf.Flush()
	})
	if err != nil {
		return st, err
	}
	st.describe(l, old.ChunkMap)
	return st, nil
}

// deltaFile is a delta file read and checked: the new file's chunk map, each chunk's record (Op 0:
// none) and the new file's manifest. Records view the file's bytes.
type deltaFile struct {
	chunkMap *wire.ChunkMap
	records  []wire.Record
	count    int // records present
	manifest []uint64
}

// readDelta checks b, a whole delta file: magic, every frame's check, the step, records in
// increasing chunk order inside the chunk map, the end's count and manifest, nothing after it.
func readDelta(b []byte) (*deltaFile, error) {
	switch {
	case len(b) >= len(deltaMagicV1) && string(b[:len(deltaMagicV1)]) == deltaMagicV1:
		return nil, errors.New("a delta file of an earlier needle (one record per tensor, CRC-32C): this build reads its own format only; encode it again from the two checkpoints")
	case len(b) < len(deltaMagic) || string(b[:len(deltaMagic)]) != deltaMagic:
		return nil, fmt.Errorf("not a needle delta file (it does not start with %q)", deltaMagic)
	}
	pos := len(deltaMagic)
	// next reads the frame at pos; a file that ends before it is cut.
	next := func() (wire.Kind, []byte, error) {
		k, p, n, err := wire.ParseFrame(b[pos:])
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("the file ends at byte %d, before its end frame: %w", pos, io.ErrUnexpectedEOF)
		} else if err != nil {
			err = fmt.Errorf("frame at byte %d: %w", pos, err)
		}
		pos += n
		return k, p, err
	}
	k, p, err := next()
	var step wire.Step
	if err == nil {
		err = wire.Unmarshal(k, wire.KindStep, p, &step)
	}
	if err != nil {
		return nil, err
	}
	if step.StepInfo != deltaStep || step.First != 0 {
		return nil, fmt.Errorf("step %d -> %d from record %d, a delta file holds step 1 -> 2 from record 0", step.From, step.To, step.First)
	}
	l, err := wire.NewChunkMap(step.Header, step.Size, step.Chunk)
	if err != nil {
		return nil, fmt.Errorf("the new file's chunkMap: %w", err)
	}
	d := &deltaFile{chunkMap: l, records: make([]wire.Record, l.Chunks())}
	last := -1
	for {
		if k, p, err = next(); err != nil {
			return nil, err
		}
		if k != wire.KindRecord {
			break
		}
		rec, err := wire.ParseRecord(p)
		if err != nil {
			return nil, err
		}
		if rec.Chunk <= last || rec.Chunk >= l.Chunks() {
			return nil, fmt.Errorf("record %d is for chunk %d, after chunk %d of %d", d.count, rec.Chunk, last, l.Chunks())
		}
		d.records[rec.Chunk], last = rec, rec.Chunk
		d.count++
	}
	var end wire.End
	if err := wire.Unmarshal(k, wire.KindEnd, p, &end); err != nil {
		return nil, err
	}
	switch {
	case end.Records != d.count:
		return nil, fmt.Errorf("%d records, its end frame counts %d", d.count, end.Records)
	case len(end.Manifest) != l.Chunks():
		return nil, fmt.Errorf("a manifest of %d hashes for %d chunks", len(end.Manifest), l.Chunks())
	case pos != len(b):
		return nil, fmt.Errorf("%d bytes after its end frame", len(b)-pos)
	}
	d.manifest = end.Manifest
	return d, nil
}

// Apply writes to outPath (atomically: nothing is left there on error) the file that the
// delta file deltaPath turns basePath into, on threads goroutines. Each rebuilds one chunk at a
// time in a buffer of its own: the base's bytes of the chunk's tensor (same name, dtype and
// shape), then the chunk's record, then its xxh64 against the new file's manifest while the
// chunk is in cache, then one write into the output (a write, not a mapping: a full disk is an
// error, and no page is zeroed before it is written).
func Apply(basePath, deltaPath, outPath string, threads int) (Stats, error) {
	var st Stats
	raw, releaseRaw, err := mapfile.Map(deltaPath, false, true)
	if err != nil {
		return st, err
	}
	defer releaseRaw()
	d, err := readDelta(raw)
	if err != nil {
		return st, fmt.Errorf("%s: %w", deltaPath, err)
	}
	l := d.chunkMap
	base, releaseBase, err := mapImage(basePath, l.Chunk, false) // read once, in chunks: faulted in as read
	if err != nil {
		return st, err
	}
	defer releaseBase()
	match := l.Match(base.ChunkMap)
	if err := d.covers(base.ChunkMap, match, basePath); err != nil {
		return st, err
	}
	t := wire.NewTarget(l, nil, base.ChunkMap)
	err = atomicfile.Create(outPath, func(out *os.File) error {
		if _, err := out.WriteAt(l.Header, 0); err != nil {
			return err
		}
		if err := rebuild(out, t, base, match, d, basePath, threads); err != nil {
			return err
		}
		return t.Complete()
	})
	if err != nil {
		return st, err
	}
	st.describe(l, base.ChunkMap)
	st.Changed, st.Records, st.DeltaBytes = t.Changed(), d.count, int64(len(raw))
	return st, nil
}

// covers checks, before any byte is written, that every chunk of the new file has its bytes in
// the base (a tensor of the same name, dtype and shape: match) or in a raw record of its
// length: so the output is no larger than the base and the delta file together.
func (d *deltaFile) covers(base *wire.ChunkMap, match []int, basePath string) error {
	l := d.chunkMap
	for i, rec := range d.records {
		t, _, n := l.Span(i)
		if _, ok := l.BaseOffset(base, match, i); !ok && (rec.Op != wire.OpRaw || int64(len(rec.Body)) != n) {
			return fmt.Errorf("tensor %q chunk %d: %s has no tensor of that name, dtype and shape, and the delta no raw record of the chunk", l.Tensors[t].Name, i, basePath)
		}
	}
	return nil
}

// rebuild writes every chunk of t's chunk map into out on threads goroutines (see Apply) and
// returns the first error.
func rebuild(out *os.File, t *wire.Target, base wire.Image, match []int, d *deltaFile, basePath string, threads int) error {
	l := t.L
	var next atomic.Int64
	var failed atomic.Bool
	errs := make([]error, max(threads, 1))
	var wg sync.WaitGroup
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var scratch delta.Sparse
			buf := make([]byte, l.Chunk)
			for i := int(next.Add(1) - 1); i < l.Chunks() && !failed.Load(); i = int(next.Add(1) - 1) {
				if err := rebuildChunk(out, buf, t, base, match, d, i, &scratch, basePath); err != nil {
					errs[w] = err
					failed.Store(true)
				}
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

// rebuildChunk writes chunk i of the new file into out, built in buf: the base's bytes, then
// the record; checked against the manifest.
func rebuildChunk(out *os.File, buf []byte, t *wire.Target, base wire.Image, match []int, d *deltaFile, i int, scratch *delta.Sparse, basePath string) error {
	l := t.L
	tensor, off, n := l.Span(i)
	chunk := buf[:n]
	if boff, ok := l.BaseOffset(base.ChunkMap, match, i); ok {
		copy(chunk, base.Data[boff:boff+n])
	}
	if rec := d.records[i]; rec.Op != 0 {
		if err := t.ApplyTo(chunk, rec, scratch); err != nil {
			return err
		}
	}
	if got := xxhash.Sum64(chunk); got != d.manifest[i] {
		return fmt.Errorf("tensor %q chunk %d: rebuilt bytes differ from the new file's (xxh64 %016x, want %016x): %s is not the file the delta was encoded against, or the delta is corrupt",
			l.Tensors[tensor].Name, i, got, d.manifest[i], basePath)
	}
	_, err := out.WriteAt(chunk, off)
	return err
}
