// Package safetensors reads and writes the Hugging Face safetensors format: an 8-byte
// little-endian header length N, N bytes of JSON header
// ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}),
// then the raw little-endian tensor bytes (offsets are relative to the end of the header).
//
// Reading mmaps the file read-only: Bytes returns views, never copies. Writing streams
// tensors into a temp file that is fsynced and renamed into place only when complete.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"needle/internal/byteview"
	"needle/internal/half"
	"needle/internal/mapfile"
)

// maxHeaderLen bounds the JSON header (the reference Rust reader uses the same 100 MB).
const maxHeaderLen = 100 << 20

// dtypeSizes is the element size in bytes of every dtype the format defines.
var dtypeSizes = map[string]int64{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// DTypeSize is the element size in bytes of dtype, or 0 if the format does not define it.
func DTypeSize(dtype string) int64 { return dtypeSizes[dtype] }

// Tensor describes one tensor. Begin and End are byte offsets into the data section
// (after the header); Create computes them, so writers leave them zero.
type Tensor struct {
	Name  string
	DType string
	Shape []int64
	Begin int64
	End   int64
}

// NumElements is the product of Shape (1 for a scalar).
func (t Tensor) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// NumBytes is the size of the tensor's data.
func (t Tensor) NumBytes() int64 { return t.NumElements() * DTypeSize(t.DType) }

// File is an open, mmapped safetensors file. Views it returns are valid until Close.
// Safe for concurrent readers; Close must not race with them.
type File struct {
	path     string
	mapped   []byte // whole file, read-only mmap; nil for an empty data section
	data     []byte // the data section inside mapped
	tensors  []Tensor
	byName   map[string]int
	metadata map[string]string
}

// Open mmaps path and validates its header: every tensor has a known dtype, a shape whose
// size matches its byte range, and a range inside the file that overlaps no other tensor.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() < 8 {
		return nil, fmt.Errorf("%s: %d bytes is too short for a safetensors file", path, st.Size())
	}
	mapped, err := mapfile.File(fd, st.Size(), false, false)
	if err != nil {
		return nil, err
	}
	f, err := parse(mapped)
	if err != nil {
		unix.Munmap(mapped)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.path, f.mapped = path, mapped
	return f, nil
}

// headerEntry is one value of the JSON header other than __metadata__.
type headerEntry struct {
	DType       string  `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// parse validates the header of a whole safetensors file held in buf; the File views buf.
func parse(buf []byte) (*File, error) {
	if len(buf) < 8 {
		return nil, fmt.Errorf("%d bytes is too short for a safetensors file", len(buf))
	}
	n := binary.LittleEndian.Uint64(buf)
	if n > maxHeaderLen || n > uint64(len(buf)-8) {
		return nil, fmt.Errorf("header length %d exceeds the file (%d bytes) or the %d limit", n, len(buf), maxHeaderLen)
	}
	tensors, metadata, err := ParseHeader(buf[:8+n], int64(len(buf))-8-int64(n))
	if err != nil {
		return nil, err
	}
	f := &File{data: buf[8+n:], tensors: tensors, metadata: metadata, byName: make(map[string]int, len(tensors))}
	for i, t := range tensors {
		f.byName[t.Name] = i
	}
	return f, nil
}

// ParseHeader validates header (the 8-byte length and the JSON, as a file starts) for a data
// section of dataLen bytes, as Open does, and returns the tensors in file order and the
// __metadata__. For headers that travel without their file (weight transfer).
func ParseHeader(header []byte, dataLen int64) ([]Tensor, map[string]string, error) {
	if len(header) < 8 || binary.LittleEndian.Uint64(header) != uint64(len(header)-8) {
		return nil, nil, fmt.Errorf("header of %d bytes does not hold its own 8-byte length and JSON", len(header))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(header[8:], &raw); err != nil {
		return nil, nil, fmt.Errorf("header JSON: %w", err)
	}
	var tensors []Tensor
	var metadata map[string]string
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &metadata); err != nil {
				return nil, nil, fmt.Errorf("__metadata__ must map strings to strings: %w", err)
			}
			continue
		}
		t, err := parseEntry(name, msg, dataLen)
		if err != nil {
			return nil, nil, err
		}
		tensors = append(tensors, t)
	}
	sort.Slice(tensors, func(i, j int) bool {
		a, b := tensors[i], tensors[j]
		return a.Begin < b.Begin || a.Begin == b.Begin && a.End < b.End
	})
	for i, t := range tensors {
		if i > 0 && t.Begin < tensors[i-1].End {
			return nil, nil, fmt.Errorf("tensor %q overlaps tensor %q", t.Name, tensors[i-1].Name)
		}
	}
	return tensors, metadata, nil
}

func parseEntry(name string, msg json.RawMessage, dataLen int64) (Tensor, error) {
	var e headerEntry
	if err := json.Unmarshal(msg, &e); err != nil {
		return Tensor{}, fmt.Errorf("tensor %q: %w", name, err)
	}
	size := DTypeSize(e.DType)
	if size == 0 {
		return Tensor{}, fmt.Errorf("tensor %q: unknown dtype %q", name, e.DType)
	}
	if len(e.DataOffsets) != 2 {
		return Tensor{}, fmt.Errorf("tensor %q: data_offsets must be [begin, end]", name)
	}
	t := Tensor{Name: name, DType: e.DType, Shape: e.Shape, Begin: e.DataOffsets[0], End: e.DataOffsets[1]}
	if t.Shape == nil {
		return Tensor{}, fmt.Errorf("tensor %q: missing shape", name)
	}
	elems := int64(1)
	for _, d := range t.Shape {
		if d < 0 || d > 0 && elems > math.MaxInt64/size/d {
			return Tensor{}, fmt.Errorf("tensor %q: invalid shape %v", name, t.Shape)
		}
		elems *= d
	}
	if t.Begin < 0 || t.End < t.Begin || t.End > dataLen {
		return Tensor{}, fmt.Errorf("tensor %q: data_offsets [%d, %d] outside the %d-byte data section", name, t.Begin, t.End, dataLen)
	}
	if t.End-t.Begin != elems*size {
		return Tensor{}, fmt.Errorf("tensor %q: %s%v needs %d bytes, data_offsets give %d", name, t.DType, t.Shape, elems*size, t.End-t.Begin)
	}
	return t, nil
}

// Path is the file's path as given to Open.
func (f *File) Path() string { return f.path }

// Tensors lists the tensors in file order. The slice is shared: do not modify it.
func (f *File) Tensors() []Tensor { return f.tensors }

// Metadata is the header's __metadata__ (nil if absent). Shared: do not modify it.
func (f *File) Metadata() map[string]string { return f.metadata }

// Tensor looks a tensor up by name.
func (f *File) Tensor(name string) (Tensor, bool) {
	i, ok := f.byName[name]
	if !ok {
		return Tensor{}, false
	}
	return f.tensors[i], true
}

// Bytes is a read-only view of the tensor's data, valid until Close.
func (f *File) Bytes(name string) ([]byte, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("%s: no tensor %q", f.path, name)
	}
	return f.data[t.Begin:t.End:t.End], nil
}

// Float32 converts an F32, F16 or BF16 tensor into a new float32 slice the caller owns.
func (f *File) Float32(name string) ([]float32, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("%s: no tensor %q", f.path, name)
	}
	out := make([]float32, t.NumElements())
	return out, f.Float32Into(out, name)
}

// Float32Into converts an F32, F16 or BF16 tensor into dst, which must hold exactly its
// elements (callers reuse one buffer for many tensors).
func (f *File) Float32Into(dst []float32, name string) error {
	b, err := f.Bytes(name)
	if err != nil {
		return err
	}
	t, _ := f.Tensor(name)
	if int64(len(dst)) != t.NumElements() {
		return fmt.Errorf("%s: tensor %q has %d elements, the buffer %d", f.path, name, t.NumElements(), len(dst))
	}
	switch t.DType {
	case "F32":
		byteview.ReadFloat32s(dst, b)
	case "BF16":
		for i := range dst {
			dst[i] = half.BF16ToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case "F16":
		for i := range dst {
			dst[i] = half.ToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	default:
		return fmt.Errorf("%s: tensor %q has dtype %s; want F32, F16 or BF16", f.path, name, t.DType)
	}
	return nil
}

// Close unmaps the file; views returned earlier become invalid.
func (f *File) Close() error {
	if f.mapped == nil {
		return nil
	}
	err := unix.Munmap(f.mapped)
	f.mapped, f.data = nil, nil
	return err
}

// escapeJSON returns s as a JSON string literal.
func escapeJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// headerJSON renders the header with tensors in the given order (json.Marshal of a map
// would sort names, and readers of streaming writers expect file order to match).
func headerJSON(tensors []Tensor, metadata map[string]string) []byte {
	var sb strings.Builder
	sb.WriteByte('{')
	if len(metadata) > 0 {
		m, _ := json.Marshal(metadata)
		sb.WriteString(`"__metadata__":`)
		sb.Write(m)
	}
	for i, t := range tensors {
		if i > 0 || len(metadata) > 0 {
			sb.WriteByte(',')
		}
		shape, _ := json.Marshal(t.Shape)
		fmt.Fprintf(&sb, `%s:{"dtype":%q,"shape":%s,"data_offsets":[%d,%d]}`, escapeJSON(t.Name), t.DType, shape, t.Begin, t.End)
	}
	sb.WriteByte('}')
	// Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
	for (sb.Len())%8 != 0 {
		sb.WriteByte(' ')
	}
	return []byte(sb.String())
}
