// Package deltafile diffs two safetensors files into one delta file and applies it,
// tensor by tensor: memory holds at most one tensor's copy plus its delta record and
// the entries Encode needs (the inputs are mmapped). Outputs appear atomically.
//
// Delta file layout (all integers little-endian):
//
//	"NDLTFILE"                         8-byte magic
//	records                            back to back; offsets in the index
//	index                              JSON (Index)
//	u64 index length, "NDLTFILE"       16-byte footer
//
// The first record is the new file's safetensors header (its 8-byte length and JSON,
// verbatim), so apply reproduces the new file byte for byte whatever wrote it. Then one
// record per tensor of the new file in data order: for op "delta" a record of package
// delta in the index's format, applied to the same-named base tensor (same dtype and
// shape); for op "full" the tensor's raw bytes (tensors the base lacks, whose dtype or
// shape changed, or whose elements are not 2 or 4 bytes). Each tensor carries the
// CRC-32C of its new bytes, checked after apply, so a wrong base file or a corrupt
// record is an error, never a silently wrong output.
package deltafile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"needle/internal/atomicfile"
	"needle/internal/mapfile"
	"needle/internal/writer"
	"needle/kernels/trainer/delta"
	"needle/safetensors"
)

const (
	magic     = "NDLTFILE"
	footerLen = 16
	version   = 1
)

// Index is the JSON index of a delta file.
type Index struct {
	Version      int      `json:"version"`
	Format       string   `json:"format"` // "astraflow" or "compact"
	HeaderOffset int64    `json:"header_offset"`
	HeaderLength int64    `json:"header_length"`
	HeaderCRC32C uint32   `json:"header_crc32c"`
	Tensors      []Entry  `json:"tensors"` // the new file's tensors in data order
	Removed      []string `json:"removed"` // base tensors the new file does not have
}

// Entry is one tensor of the new file.
type Entry struct {
	Name   string  `json:"name"`
	DType  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	Op     string  `json:"op"`     // "delta" or "full"
	Offset int64   `json:"offset"` // record position in the delta file
	Length int64   `json:"length"` // record bytes
	Bytes  int64   `json:"bytes"`  // tensor bytes in the new file
	Nnz    int64   `json:"nnz"`    // changed elements (op "delta")
	CRC32C uint32  `json:"crc32c"` // of the new tensor bytes
	Reason string  `json:"reason,omitempty"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Stats summarizes one encode or apply.
type Stats struct {
	Tensors, Delta, Full, Removed int
	Notes                         []string // one line per tensor sent in full or removed, and why
	Elements, Changed             int64    // over op "delta" tensors
	TensorBytes, DeltaBytes       int64    // new file's tensor bytes; delta file size
}

// Encode writes the delta that turns oldPath into newPath to outPath, in format f,
// encoding each tensor with threads threads.
func Encode(oldPath, newPath, outPath string, f delta.Format, threads int) (Stats, error) {
	var st Stats
	oldF, err := safetensors.Open(oldPath)
	if err != nil {
		return st, err
	}
	defer oldF.Close()
	newF, err := safetensors.Open(newPath)
	if err != nil {
		return st, err
	}
	defer newF.Close()
	header, err := readHeader(newPath)
	if err != nil {
		return st, err
	}
	idx := Index{Version: version, Format: f.String(), HeaderOffset: int64(len(magic)), HeaderLength: int64(len(header)),
		HeaderCRC32C: crc32.Checksum(header, castagnoli)}
	for _, t := range oldF.Tensors() {
		if _, ok := newF.Tensor(t.Name); !ok {
			idx.Removed = append(idx.Removed, t.Name)
		}
	}
	err = atomicfile.Create(outPath, func(out *os.File) error {
		buf := bufio.NewWriterSize(out, 4<<20)
		w := &writer.Counting{W: buf}
		w.Write([]byte(magic))
		w.Write(header)
		var s delta.Sparse
		var end int64
		for _, t := range newF.Tensors() {
			if t.Begin != end {
				return fmt.Errorf("%s: tensor %q starts at %d, after a hole from %d", newPath, t.Name, t.Begin, end)
			}
			end = t.End
			nb, err := newF.Bytes(t.Name)
			if err != nil {
				return err
			}
			e := Entry{Name: t.Name, DType: t.DType, Shape: t.Shape, Offset: w.N, Bytes: int64(len(nb)),
				CRC32C: crc32.Checksum(nb, castagnoli)}
			ob, reason := baseBytes(oldF, t)
			if reason == "" {
				e.Op = "delta"
				if err := delta.Encode(&s, ob, nb, int(safetensors.DTypeSize(t.DType)), threads); err != nil {
					return fmt.Errorf("tensor %q: %w", t.Name, err)
				}
				e.Nnz = s.Count()
				_, err = delta.WriteRecord(w, f, &s, ob, nb)
			} else {
				e.Op, e.Reason = "full", reason
				_, err = w.Write(nb)
			}
			if err != nil {
				return err
			}
			e.Length = w.N - e.Offset
			idx.Tensors = append(idx.Tensors, e)
		}
		js, err := json.Marshal(idx)
		if err != nil {
			return err
		}
		w.Write(js)
		w.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(js))))
		w.Write([]byte(magic))
		st.DeltaBytes = w.N
		if w.Err != nil {
			return w.Err
		}
		return buf.Flush()
	})
	st.count(idx)
	return st, err
}

func (st *Stats) count(idx Index) {
	st.Tensors, st.Removed = len(idx.Tensors), len(idx.Removed)
	for _, name := range idx.Removed {
		st.Notes = append(st.Notes, name+": removed (not in the new file)")
	}
	for _, e := range idx.Tensors {
		if e.Op == "delta" {
			st.Delta++
			st.Elements += e.Bytes / safetensors.DTypeSize(e.DType)
			st.Changed += e.Nnz
		} else {
			st.Full++
			st.Notes = append(st.Notes, fmt.Sprintf("%s: sent in full (%s)", e.Name, e.Reason))
		}
		st.TensorBytes += e.Bytes
	}
}

// baseBytes returns the base tensor to diff t against, or why t is sent in full.
func baseBytes(oldF *safetensors.File, t safetensors.Tensor) ([]byte, string) {
	o, ok := oldF.Tensor(t.Name)
	switch {
	case !ok:
		return nil, "added"
	case o.DType != t.DType:
		return nil, fmt.Sprintf("dtype changed from %s", o.DType)
	case !slices.Equal(o.Shape, t.Shape):
		return nil, fmt.Sprintf("shape changed from %v", o.Shape)
	case safetensors.DTypeSize(t.DType) != 2 && safetensors.DTypeSize(t.DType) != 4:
		return nil, fmt.Sprintf("%s elements are not 2 or 4 bytes", t.DType)
	}
	b, err := oldF.Bytes(t.Name)
	if err != nil {
		return nil, err.Error()
	}
	return b, ""
}

// readHeader returns the 8-byte length and JSON header of a safetensors file, verbatim.
func readHeader(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var n [8]byte
	if _, err := io.ReadFull(f, n[:]); err != nil {
		return nil, fmt.Errorf("%s: header length: %w", path, err)
	}
	h := make([]byte, 8+binary.LittleEndian.Uint64(n[:])) // safetensors.Open bounded it
	copy(h, n[:])
	if _, err := io.ReadFull(f, h[8:]); err != nil {
		return nil, fmt.Errorf("%s: header: %w", path, err)
	}
	return h, nil
}

// ReadIndex reads and checks the index of the open delta file f: magic, footer, version,
// format, and that every record lies inside the file.
func ReadIndex(f *os.File) (Index, error) {
	var idx Index
	st, err := f.Stat()
	if err != nil {
		return idx, err
	}
	size := st.Size()
	var foot [footerLen]byte
	if size < int64(len(magic))+footerLen {
		return idx, fmt.Errorf("%s: %d bytes is too short for a delta file", f.Name(), size)
	}
	var head [len(magic)]byte
	if _, err := f.ReadAt(head[:], 0); err != nil {
		return idx, fmt.Errorf("%s: %w", f.Name(), err)
	}
	if _, err := f.ReadAt(foot[:], size-footerLen); err != nil {
		return idx, fmt.Errorf("%s: %w", f.Name(), err)
	}
	if string(head[:]) != magic || string(foot[8:]) != magic {
		return idx, fmt.Errorf("%s: not a needle delta file (magic %q ... %q, want %q)", f.Name(), head[:], foot[8:], magic)
	}
	n := binary.LittleEndian.Uint64(foot[:8])
	if n > uint64(size-footerLen-int64(len(magic))) {
		return idx, fmt.Errorf("%s: index length %d exceeds the file", f.Name(), n)
	}
	js := make([]byte, n)
	idxAt := size - footerLen - int64(n)
	if _, err := f.ReadAt(js, idxAt); err != nil {
		return idx, fmt.Errorf("%s: index: %w", f.Name(), err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&idx); err != nil {
		return idx, fmt.Errorf("%s: index JSON: %w", f.Name(), err)
	}
	if idx.Version != version {
		return idx, fmt.Errorf("%s: delta file version %d, this build reads %d", f.Name(), idx.Version, version)
	}
	if _, err := delta.ParseFormat(idx.Format); err != nil {
		return idx, fmt.Errorf("%s: index: %w", f.Name(), err)
	}
	inFile := func(off, n int64) bool { return off >= int64(len(magic)) && n >= 0 && off <= idxAt && n <= idxAt-off }
	if !inFile(idx.HeaderOffset, idx.HeaderLength) || idx.HeaderLength < 8 {
		return idx, fmt.Errorf("%s: header record [%d, +%d) is outside the records", f.Name(), idx.HeaderOffset, idx.HeaderLength)
	}
	for _, e := range idx.Tensors {
		es := safetensors.DTypeSize(e.DType)
		okOp := e.Op == "delta" && (es == 2 || es == 4) || e.Op == "full" && e.Length == e.Bytes
		if !inFile(e.Offset, e.Length) || e.Bytes < 0 || !okOp {
			return idx, fmt.Errorf("%s: tensor %q: bad entry (op %q, record [%d, +%d), %d bytes)", f.Name(), e.Name, e.Op, e.Offset, e.Length, e.Bytes)
		}
	}
	return idx, nil
}

// Apply writes to outPath the file that deltaPath turns basePath into, applying each
// tensor's record with threads threads. Nothing is written to outPath on error.
func Apply(basePath, deltaPath, outPath string, threads int) (Stats, error) {
	var st Stats
	baseF, err := safetensors.Open(basePath)
	if err != nil {
		return st, err
	}
	defer baseF.Close()
	df, err := os.Open(deltaPath)
	if err != nil {
		return st, err
	}
	defer df.Close()
	idx, err := ReadIndex(df)
	if err != nil {
		return st, err
	}
	format, _ := delta.ParseFormat(idx.Format)
	// Records are read through a read-only mmap: they cost page cache, not heap. ReadIndex
	// checked every record lies inside the file.
	info, err := df.Stat()
	if err != nil {
		return st, err
	}
	mapped, err := mapfile.File(df, info.Size(), false, false)
	if err != nil {
		return st, err
	}
	defer unix.Munmap(mapped)
	read := func(off, n int64) []byte { return mapped[off : off+n] }
	header := read(idx.HeaderOffset, idx.HeaderLength)
	if crc32.Checksum(header, castagnoli) != idx.HeaderCRC32C {
		return st, fmt.Errorf("%s: the safetensors header record does not match its checksum", deltaPath)
	}
	err = atomicfile.Create(outPath, func(out *os.File) error {
		w := bufio.NewWriterSize(out, 4<<20)
		w.Write(header)
		var scratch delta.Sparse
		var buf []byte // the tensor being rebuilt; reused, grows to the largest
		for _, e := range idx.Tensors {
			rec := read(e.Offset, e.Length)
			result := rec
			if e.Op == "delta" {
				bt, ok := baseF.Tensor(e.Name)
				if !ok || bt.DType != e.DType || !slices.Equal(bt.Shape, e.Shape) {
					return fmt.Errorf("%s: tensor %q: the delta needs a %s %v base tensor, the base has %s %v", basePath, e.Name, e.DType, e.Shape, bt.DType, bt.Shape)
				}
				bb, err := baseF.Bytes(e.Name)
				if err != nil {
					return err
				}
				buf = append(buf[:0], bb...)
				if err := delta.ApplyRecord(buf, int(safetensors.DTypeSize(e.DType)), format, rec, &scratch, threads); err != nil {
					return fmt.Errorf("%s: tensor %q: %w", deltaPath, e.Name, err)
				}
				result = buf
			}
			if int64(len(result)) != e.Bytes || crc32.Checksum(result, castagnoli) != e.CRC32C {
				return fmt.Errorf("tensor %q: rebuilt bytes do not match the new file's checksum (wrong base file %s, or a corrupt delta)", e.Name, basePath)
			}
			if _, err := w.Write(result); err != nil {
				return err
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
		return checkOutput(out.Name(), idx)
	})
	if err != nil {
		return st, err
	}
	st.count(idx)
	return st, nil
}

// checkOutput opens the rebuilt file before it is renamed into place: it must be valid
// safetensors holding the index's tensors, which catches a header record that does not
// match the tensors written after it.
func checkOutput(path string, idx Index) error {
	f, err := safetensors.Open(path)
	if err != nil {
		return fmt.Errorf("rebuilt file is not valid safetensors: %w", err)
	}
	defer f.Close()
	got := f.Tensors()
	if len(got) != len(idx.Tensors) {
		return fmt.Errorf("rebuilt file has %d tensors, the delta lists %d", len(got), len(idx.Tensors))
	}
	for i, t := range got {
		if e := idx.Tensors[i]; t.Name != e.Name || t.DType != e.DType || !slices.Equal(t.Shape, e.Shape) {
			return fmt.Errorf("rebuilt file's tensor %d is %q %s %v, the delta lists %q %s %v", i, t.Name, t.DType, t.Shape, e.Name, e.DType, e.Shape)
		}
	}
	return nil
}
