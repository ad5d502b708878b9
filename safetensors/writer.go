package safetensors

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"needle/internal/atomicfile"
)

// Writer streams tensors into a new safetensors file. The header is written first (so the
// caller declares every tensor up front), then WriteTensor is called once per tensor in
// header order. Nothing appears at the final path until Close succeeds: the data goes to a
// temp file in the same folder that Close fsyncs and renames. Not safe for concurrent use.
type Writer struct {
	path    string
	tmp     *os.File
	buf     *bufio.Writer
	tensors []Tensor
	next    int   // index of the tensor WriteTensor expects
	err     error // first error; once set, Close abandons the file
}

// Create validates tensors (known dtype, non-negative shape, unique names), lays them out
// back to back in the given order, and writes the header to a temp file next to path.
// Begin/End of the given tensors are ignored.
func Create(path string, tensors []Tensor, metadata map[string]string) (*Writer, error) {
	header, laid, err := EncodeHeader(tensors, metadata)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, err
	}
	w := &Writer{path: path, tmp: tmp, buf: bufio.NewWriterSize(tmp, 1<<20), tensors: laid}
	w.write(header)
	if w.err != nil {
		w.abandon()
		return nil, w.err
	}
	return w, nil
}

func (w *Writer) write(b []byte) {
	if w.err == nil {
		if _, err := w.buf.Write(b); err != nil {
			w.err = fmt.Errorf("%s: %w", w.path, err)
		}
	}
}

// WriteTensor writes the next tensor's data; name and length must match the header.
// The call may be split: data can be written in several calls with the same name as long
// as their total equals the tensor's size (for tensors produced in chunks).
func (w *Writer) WriteTensor(name string, data []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.next >= len(w.tensors) {
		w.err = fmt.Errorf("%s: tensor %q written after all %d declared tensors", w.path, name, len(w.tensors))
		return w.err
	}
	t := &w.tensors[w.next]
	if t.Name != name {
		w.err = fmt.Errorf("%s: tensor %q written out of order; header expects %q next", w.path, name, t.Name)
		return w.err
	}
	if int64(len(data)) > t.End-t.Begin {
		w.err = fmt.Errorf("%s: tensor %q: %d bytes exceed its %d bytes", w.path, name, len(data), t.End-t.Begin)
		return w.err
	}
	w.write(data)
	t.Begin += int64(len(data)) // Begin now counts what is written; header already on disk
	if t.Begin == t.End {
		w.next++
	}
	return w.err
}

// Close completes the file: every declared tensor must be fully written. On success the file
// is fsynced and renamed to its path; on any error (now or earlier) the temp file is removed
// and nothing is left at path.
func (w *Writer) Close() error {
	if w.tmp == nil {
		return w.err
	}
	if w.err == nil && w.next < len(w.tensors) {
		w.err = fmt.Errorf("%s: closed before tensor %q was written", w.path, w.tensors[w.next].Name)
	}
	if w.err == nil {
		if err := w.buf.Flush(); err != nil {
			w.err = fmt.Errorf("%s: %w", w.path, err)
		} else if err := w.tmp.Sync(); err != nil {
			w.err = fmt.Errorf("%s: fsync: %w", w.path, err)
		}
	}
	if w.err != nil {
		w.abandon()
		return w.err
	}
	name := w.tmp.Name()
	if err := w.tmp.Close(); err != nil {
		w.err = fmt.Errorf("%s: %w", w.path, err)
		os.Remove(name)
		w.tmp = nil
		return w.err
	}
	w.tmp = nil
	if err := os.Rename(name, w.path); err != nil {
		os.Remove(name)
		w.err = err
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(w.path))
}

// EncodeHeader validates tensors (known dtype, non-negative shape, unique names), lays them
// out back to back in the given order (Begin/End of the given tensors are ignored) and
// returns the file's first bytes (the 8-byte length and the JSON header, padded so the data
// starts 8-byte aligned) with the laid-out tensors. Create writes it; weight transfer lays a
// published version out in shared memory with it.
func EncodeHeader(tensors []Tensor, metadata map[string]string) ([]byte, []Tensor, error) {
	laid := make([]Tensor, len(tensors))
	seen := make(map[string]bool, len(tensors))
	var off int64
	for i, t := range tensors {
		if DTypeSize(t.DType) == 0 {
			return nil, nil, fmt.Errorf("tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		if t.Name == "__metadata__" || seen[t.Name] {
			return nil, nil, fmt.Errorf("tensor name %q is reserved or repeated", t.Name)
		}
		seen[t.Name] = true
		for _, d := range t.Shape {
			if d < 0 {
				return nil, nil, fmt.Errorf("tensor %q: negative dimension in %v", t.Name, t.Shape)
			}
		}
		t.Shape = append([]int64{}, t.Shape...)
		t.Begin, t.End = off, off+t.NumBytes()
		off = t.End
		laid[i] = t
	}
	js := headerJSON(laid, metadata)
	return append(binary.LittleEndian.AppendUint64(make([]byte, 0, 8+len(js)), uint64(len(js))), js...), laid, nil
}

// Abort abandons the file: the temp file is removed and nothing is written at path.
func (w *Writer) Abort() {
	if w.err == nil {
		w.err = fmt.Errorf("%s: writer aborted", w.path)
	}
	if w.tmp != nil {
		w.abandon()
	}
}

func (w *Writer) abandon() {
	name := w.tmp.Name()
	w.tmp.Close()
	os.Remove(name)
	w.tmp = nil
}
