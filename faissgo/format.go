package faissgo

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
)

// FAISS trusts most size fields of an index file: a corrupt file can make it allocate up to a
// terabyte per array (std::vector::resize before reading; FAISS 1.12.0 refuses only 2^40
// elements and more), leave a null inverted-list pointer, or keep HNSW neighbor ids that point
// outside the index and crash a later search. Stat walks the file format of FAISS 1.12.0
// (faiss/impl/index_read.cpp) for the index types needle supports, without loading vector
// data, and rejects anything FAISS would not handle safely. What FAISS checks itself is not
// checked again here, except where Stat's answer is used without FAISS reading the file
// (StatFlat: the mapped flat index).

// FileInfo describes an index file, read from its headers without loading it.
type FileInfo struct {
	Type   string // FAISS's 4-byte tag of the top-level index, e.g. "IxFI" (flat IP), "IHNf", "IwFl"
	Dim    int
	Ntotal int64
	Metric Metric
}

// typeNames are the FAISS classes of the file tags needle reads.
var typeNames = map[string]string{
	"IxFI": "IndexFlatIP", "IxF2": "IndexFlatL2", "IxFl": "IndexFlat",
	"IxSQ": "IndexScalarQuantizer",
	"IHNf": "IndexHNSWFlat", "IHNs": "IndexHNSWSQ",
	"IwFl": "IndexIVFFlat", "IwPQ": "IndexIVFPQ",
	"IwSQ": "IndexIVFScalarQuantizer", "IwSq": "IndexIVFScalarQuantizer",
	"IxPT": "IndexPreTransform",
}

// TypeName is the FAISS class FAISS reads the file as (Index.TypeName after Read).
func (i FileInfo) TypeName() string { return typeNames[i.Type] }

// FormatError is a problem in an index file, at byte Offset.
type FormatError struct {
	Path   string
	Offset int64
	Msg    string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("faissgo: index file %s: at byte %d: %s", e.Path, e.Offset, e.Msg)
}

// Limits on header fields beyond which a file is treated as corrupt, not as a huge index.
const (
	maxDim      = 1 << 16
	maxEfSearch = 1 << 20
	scanChunk   = 1 << 20 // bytes read at a time when scanning arrays
)

// Stat checks the index file at path and returns its type, dimension, count and metric.
// It reads headers and size fields only (plus the graph of an HNSW index), so it is fast on
// a flat index of any size.
func Stat(path string) (FileInfo, error) {
	var info FileInfo
	err := walkFile(path, func(w *walker) (err error) {
		info, err = w.index(topLevel)
		return err
	})
	return info, err
}

// FlatVectors says where the vectors of a flat index file lie: Ntotal rows of Dim
// little-endian float32s, row after row, from byte Offset to the end of the file. The
// mapped flat index (index/flat) maps them in place instead of reading them.
type FlatVectors struct {
	FileInfo
	Offset int64
}

// FlatClasses are the classes StatFlat accepts (and embeddings files may be), for error messages.
const FlatClasses = "IndexFlatIP, IndexFlatL2 and IndexFlat (metric IP or L2)"

// StatFlat checks that path is a whole flat index file and returns where its vectors lie.
// Another FAISS class is an error naming it and the classes accepted; a file whose size
// does not match its header is an error naming both sizes.
func StatFlat(path string) (FlatVectors, error) {
	var v FlatVectors
	err := walkFile(path, func(w *walker) error {
		tag, err := w.tag("index type")
		if err != nil {
			return err
		}
		if !isFlat(tag) {
			w.off = 0
			name := typeNames[tag]
			if name == "" {
				name = fmt.Sprintf("an unknown index type %q", tag)
			}
			return w.fail("%s is not a flat index (flat ones are %s)", name, FlatClasses)
		}
		if v.FileInfo, err = w.header(tag); err != nil {
			return err
		}
		v.Offset = w.off + 8 // past the u64 float count
		if want := v.Offset + 4*v.Ntotal*int64(v.Dim); w.size != want {
			return w.fail("truncated or corrupt: file is %d bytes, a flat index of %d vectors of dimension %d is %d bytes",
				w.size, v.Ntotal, v.Dim, want)
		}
		return w.flat(v.FileInfo)
	})
	return v, err
}

// walkFile runs walk over the index file at path and checks that it consumed the whole file.
func walkFile(path string, walk func(*walker) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("faissgo: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("faissgo: %w", err)
	}
	w := &walker{r: f, size: st.Size(), path: path}
	if err := walk(w); err != nil {
		return err
	}
	if w.off != w.size {
		return w.fail("%d unexpected bytes after the index", w.size-w.off)
	}
	return nil
}

// walker reads an index file sequentially; off is the next byte to read.
type walker struct {
	r    io.ReaderAt
	off  int64
	size int64
	path string
	buf  [8]byte
}

func (w *walker) fail(format string, args ...any) error {
	return &FormatError{Path: w.path, Offset: w.off, Msg: fmt.Sprintf(format, args...)}
}

// read fills p from the current offset.
func (w *walker) read(p []byte, what string) error {
	if int64(len(p)) > w.size-w.off {
		return w.fail("truncated: %s needs %d bytes, %d left", what, len(p), w.size-w.off)
	}
	if _, err := w.r.ReadAt(p, w.off); err != nil {
		return w.fail("reading %s: %v", what, err)
	}
	w.off += int64(len(p))
	return nil
}

func (w *walker) u8(what string) (uint8, error) {
	err := w.read(w.buf[:1], what)
	return w.buf[0], err
}

func (w *walker) i32(what string) (int32, error) {
	err := w.read(w.buf[:4], what)
	return int32(binary.LittleEndian.Uint32(w.buf[:4])), err
}

func (w *walker) u64(what string) (uint64, error) {
	err := w.read(w.buf[:8], what)
	return binary.LittleEndian.Uint64(w.buf[:8]), err
}

func (w *walker) tag(what string) (string, error) {
	err := w.read(w.buf[:4], what)
	return string(w.buf[:4]), err
}

// vectorLen reads the element count of a std::vector of elem-byte elements and checks that
// its data fits in the rest of the file; the data itself is not consumed.
func (w *walker) vectorLen(elem int64, what string) (int64, error) {
	n, err := w.u64(what + " length")
	if err != nil {
		return 0, err
	}
	left := w.size - w.off
	if n > uint64(left/elem) {
		return 0, w.fail("truncated or corrupt: %s claims %d elements of %d bytes, %d bytes left", what, n, elem, left)
	}
	return int64(n), nil
}

// skipVector consumes a std::vector and returns its element count.
func (w *walker) skipVector(elem int64, what string) (int64, error) {
	n, err := w.vectorLen(elem, what)
	w.off += n * elem
	return n, err
}

// scanChunks consumes n elements of elem bytes, calling visit with the index of the first
// element of each chunk and the chunk (a whole number of elements, at most scanChunk bytes).
func (w *walker) scanChunks(n, elem int64, what string, visit func(first int64, chunk []byte) error) error {
	buf := make([]byte, min(n*elem, scanChunk-scanChunk%elem))
	for i := int64(0); i < n; {
		chunk := buf[:min((n-i)*elem, int64(len(buf)))]
		if err := w.read(chunk, what); err != nil {
			return err
		}
		if err := visit(i, chunk); err != nil {
			return err
		}
		i += int64(len(chunk)) / elem
	}
	return nil
}

// scan is scanChunks with a call per element.
func (w *walker) scan(n, elem int64, what string, visit func(i int64, b []byte) error) error {
	return w.scanChunks(n, elem, what, func(first int64, chunk []byte) error {
		for j := int64(0); j < int64(len(chunk)); j += elem {
			if err := visit(first+j/elem, chunk[j:j+elem]); err != nil {
				return err
			}
		}
		return nil
	})
}

func int32At(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) }

// int32Vector reads a whole std::vector<int32> into memory (for small HNSW arrays).
func (w *walker) int32Vector(what string) ([]int32, error) {
	n, err := w.vectorLen(4, what)
	if err != nil {
		return nil, err
	}
	v := make([]int32, n)
	err = w.scan(n, 4, what, func(i int64, b []byte) error { v[i] = int32At(b); return nil })
	return v, err
}

// role is where an index sits in the file: sub-indexes are limited to the kinds FAISS
// builds there (flat quantizers, flat or SQ storage of HNSW).
type role int

const (
	topLevel role = iota
	quantizer
	hnswStorage
	transformed // the index behind an IndexPreTransform's transforms
)

func (w *walker) index(r role) (FileInfo, error) {
	start := w.off
	tag, err := w.tag("index type")
	if err != nil {
		return FileInfo{}, err
	}
	var body func(FileInfo) error
	switch {
	case isFlat(tag):
		body = w.flat
	case tag == "IxSQ":
		body = w.scalarQuantizerIndex
	case tag == "IHNf" || tag == "IHNs":
		body = w.hnsw
	case tag == "IwFl" || tag == "IwPQ" || tag == "IwSQ" || tag == "IwSq":
		body = w.ivf
	case tag == "IxPT":
		body = w.preTransform
	default:
		w.off = start
		return FileInfo{}, w.fail("unsupported index type %q (needle reads Flat, SQ, HNSW-Flat/SQ, IVF-Flat/PQ/SQ, each also behind OPQ/PCA/rotation transforms)", tag)
	}
	allowed := r == topLevel ||
		(r == quantizer && isFlat(tag)) ||
		(r == hnswStorage && (isFlat(tag) || tag == "IxSQ")) ||
		(r == transformed && tag != "IxPT")
	if !allowed {
		w.off = start
		return FileInfo{}, w.fail("unsupported sub-index type %q", tag)
	}
	info, err := w.header(tag)
	if err != nil {
		return FileInfo{}, err
	}
	return info, body(info)
}

// IsFlat reports whether the file is a flat index: its vectors are ntotal x dim
// little-endian float32s from byte FlatHeaderBytes on (what `needle build --embeddings`
// reads of an anchor's e5_Flat.index).
func (i FileInfo) IsFlat() bool { return isFlat(i.Type) }

func isFlat(tag string) bool { return tag == "IxFI" || tag == "IxF2" || tag == "IxFl" }

// header reads read_index_header: d, ntotal, two unused int64, is_trained, metric_type.
func (w *walker) header(tag string) (FileInfo, error) {
	info := FileInfo{Type: tag}
	d, err := w.i32("dimension")
	if err != nil {
		return info, err
	}
	if d <= 0 || d > maxDim {
		return info, w.fail("dimension %d out of range 1..%d", d, maxDim)
	}
	ntotal, err := w.u64("ntotal")
	if err != nil {
		return info, err
	}
	if ntotal > math.MaxInt32 { // FAISS HNSW and IVF ids are int32/int64; no real file is near this
		return info, w.fail("ntotal %d is implausible", ntotal)
	}
	if err := w.read(make([]byte, 17), "header"); err != nil { // 2 unused int64 + is_trained
		return info, err
	}
	metric, err := w.i32("metric type")
	if err != nil {
		return info, err
	}
	if Metric(metric) != IP && Metric(metric) != L2 {
		return info, w.fail("unsupported metric type %d (needle supports IP=0 and L2=1)", metric)
	}
	info.Dim, info.Ntotal, info.Metric = int(d), int64(ntotal), Metric(metric)
	return info, nil
}

func (w *walker) flat(info FileInfo) error {
	floats, err := w.skipVector(4, "vectors")
	if err != nil {
		return err
	}
	if floats != info.Ntotal*int64(info.Dim) {
		return w.fail("flat index holds %d floats, want ntotal %d x dimension %d", floats, info.Ntotal, info.Dim)
	}
	return nil
}

// maxTransforms bounds an IndexPreTransform's chain (FAISS factories make one or two).
const maxTransforms = 16

// preTransform reads an IndexPreTransform (OPQ or PCA before an IVF index: "OPQ64_256,IVF8192,
// PQ64"): the chain of linear transforms, then the index they feed, whose dimension is the
// chain's output and whose row count and metric are the wrapper's.
func (w *walker) preTransform(info FileInfo) error {
	n, err := w.i32("transform count")
	if err != nil {
		return err
	}
	if n < 1 || n > maxTransforms {
		return w.fail("%d transforms, want 1..%d", n, maxTransforms)
	}
	d := info.Dim
	for range n {
		if d, err = w.linearTransform(d); err != nil {
			return err
		}
	}
	sub, err := w.index(transformed)
	if err != nil {
		return err
	}
	if sub.Dim != d || sub.Ntotal != info.Ntotal || sub.Metric != info.Metric {
		return w.fail("the transformed index holds %d vectors of dimension %d (%v), the transforms give dimension %d for %d vectors (%v)",
			sub.Ntotal, sub.Dim, sub.Metric, d, info.Ntotal, info.Metric)
	}
	return nil
}

// linearTransform reads read_VectorTransform for the linear kinds (OPQ's generic "LTra", PCA,
// random rotation) taking vectors of dimension dIn, and returns its output dimension. FAISS
// checks the matrix sizes before it has read the dimensions (faiss/impl/index_read.cpp), so a
// short matrix would be read past at search time: checked here.
func (w *walker) linearTransform(dIn int) (int, error) {
	tag, err := w.tag("transform type")
	if err != nil {
		return 0, err
	}
	switch tag {
	case "LTra", "rrot":
	case "Pcam": // eigen_power, epsilon (floats), random_rotation (bool), balanced_bins (size_t), then three float vectors
		if err := w.read(make([]byte, 4+4+1+8), "PCA parameters"); err != nil {
			return 0, err
		}
		for _, what := range []string{"PCA mean", "PCA eigenvalues", "PCA matrix"} {
			if _, err := w.skipVector(4, what); err != nil {
				return 0, err
			}
		}
	default:
		return 0, w.fail("unsupported vector transform %q (needle reads linear ones: OPQ, PCA, random rotation)", tag)
	}
	bias, err := w.u8("transform has_bias")
	if err != nil {
		return 0, err
	}
	a, err := w.boundedFloats("transform matrix")
	if err != nil {
		return 0, err
	}
	b, err := w.boundedFloats("transform bias")
	if err != nil {
		return 0, err
	}
	din, err := w.i32("transform input dimension")
	if err != nil {
		return 0, err
	}
	dout, err := w.i32("transform output dimension")
	if err != nil {
		return 0, err
	}
	trained, err := w.u8("transform is_trained")
	if err != nil {
		return 0, err
	}
	switch {
	case int(din) != dIn || dout <= 0 || dout > maxDim:
		return 0, w.fail("transform from dimension %d to %d, want from %d to 1..%d", din, dout, dIn, maxDim)
	case trained != 1:
		return 0, w.fail("transform is not trained")
	case a != int64(din)*int64(dout):
		return 0, w.fail("transform matrix holds %d floats, want %d x %d", a, dout, din)
	case bias > 1 || (bias == 1 && b != int64(dout)) || (bias == 0 && b != 0 && b != int64(dout)):
		return 0, w.fail("transform bias holds %d floats (has_bias %d), want %d", b, bias, dout)
	}
	return int(dout), nil
}

// maxTransformValue bounds the entries of a transform's matrix and bias: OPQ matrices and
// rotations are orthonormal, PCA's entries are at most 1 unless whitened. A larger entry could
// make a transformed query overflow, and FAISS's IVF search with nprobe 1 then reads
// uninitialized list numbers and aborts the process (measured with 1.7.3; 1.12.0's
// Top1BlockResultHandler still leaves the label unset when no distance is finite).
const maxTransformValue = 1e6

// boundedFloats consumes a std::vector<float> whose values must be finite and within
// ±maxTransformValue, and returns its length.
func (w *walker) boundedFloats(what string) (int64, error) {
	n, err := w.vectorLen(4, what)
	if err != nil {
		return 0, err
	}
	return n, w.scan(n, 4, what, func(i int64, b []byte) error {
		if v := math.Float32frombits(binary.LittleEndian.Uint32(b)); !(math.Abs(float64(v)) <= maxTransformValue) {
			return w.fail("%s value %d is %v, want within ±%g", what, i, v, float64(maxTransformValue))
		}
		return nil
	})
}

// scalarQuantizer reads read_ScalarQuantizer and returns the code size of one vector.
func (w *walker) scalarQuantizer(dim int) (int64, error) {
	qtype, err := w.i32("scalar quantizer type")
	if err != nil {
		return 0, err
	}
	d := int64(dim)
	// code bytes per vector and trained floats, per FAISS 1.12.0 ScalarQuantizer::QuantizerType.
	var code, trained int64
	switch qtype {
	case 0: // QT_8bit
		code, trained = d, 2*d
	case 1: // QT_4bit
		code, trained = (d+1)/2, 2*d
	case 2: // QT_8bit_uniform
		code, trained = d, 2
	case 3: // QT_4bit_uniform
		code, trained = (d+1)/2, 2
	case 4: // QT_fp16
		code = 2 * d
	case 5: // QT_8bit_direct
		code = d
	case 6: // QT_6bit
		code, trained = (d*6+7)/8, 2*d
	case 7: // QT_bf16
		code = 2 * d
	case 8: // QT_8bit_direct_signed
		code = d
	default:
		return 0, w.fail("unsupported scalar quantizer type %d", qtype)
	}
	if err := w.read(make([]byte, 8), "scalar quantizer range"); err != nil { // rangestat, rangestat_arg
		return 0, err
	}
	sqd, err := w.u64("scalar quantizer dimension")
	if err != nil {
		return 0, err
	}
	if sqd != uint64(dim) {
		return 0, w.fail("scalar quantizer dimension %d differs from index dimension %d", sqd, dim)
	}
	if _, err := w.u64("scalar quantizer code size"); err != nil { // recomputed by FAISS
		return 0, err
	}
	n, err := w.skipVector(4, "scalar quantizer training")
	if err != nil {
		return 0, err
	}
	if n < trained {
		return 0, w.fail("scalar quantizer holds %d trained values, needs %d", n, trained)
	}
	return code, nil
}

func (w *walker) scalarQuantizerIndex(info FileInfo) error {
	code, err := w.scalarQuantizer(info.Dim)
	if err != nil {
		return err
	}
	n, err := w.skipVector(1, "codes")
	if err != nil {
		return err
	}
	if n != info.Ntotal*code {
		return w.fail("scalar quantizer index holds %d code bytes, want ntotal %d x %d", n, info.Ntotal, code)
	}
	return nil
}

// hnsw reads read_HNSW and the storage index, checking that a search can only visit
// neighbors inside the index.
func (w *walker) hnsw(info FileInfo) error {
	if _, err := w.skipVector(8, "HNSW level probabilities"); err != nil {
		return err
	}
	cum, err := w.int32Vector("HNSW neighbors per level")
	if err != nil {
		return err
	}
	if len(cum) < 2 || cum[0] != 0 {
		return w.fail("HNSW neighbors-per-level table is corrupt")
	}
	for i := 1; i < len(cum); i++ {
		if cum[i] < cum[i-1] {
			return w.fail("HNSW neighbors-per-level table decreases at level %d", i)
		}
	}
	n := info.Ntotal
	levels, err := w.int32Vector("HNSW levels")
	if err != nil {
		return err
	}
	if int64(len(levels)) != n {
		return w.fail("HNSW has %d levels entries for %d vectors", len(levels), n)
	}
	maxLevels := int32(len(cum) - 1)
	for i, l := range levels {
		if l < 1 || l > maxLevels {
			return w.fail("HNSW vector %d has level count %d outside 1..%d", i, l, maxLevels)
		}
	}
	last, err := w.hnswOffsets(levels, cum)
	if err != nil {
		return err
	}
	nb, err := w.vectorLen(4, "HNSW neighbors")
	if err != nil {
		return err
	}
	if nb != last {
		return w.fail("HNSW has %d neighbor slots, offsets end at %d", nb, last)
	}
	// The neighbor table is most of an HNSW file: a tight loop per chunk keeps this check
	// near the speed of FAISS's own read (measured on a 29 MB HNSW32 file under load: 0.8-1.2
	// GB/s, FAISS read 0.3-1 GB/s; 338 MB/s with a call per element).
	err = w.scanChunks(nb, 4, "HNSW neighbors", func(first int64, chunk []byte) error {
		for j := 0; j < len(chunk); j += 4 {
			if v := int32At(chunk[j:]); v < -1 || int64(v) >= n {
				return w.fail("HNSW neighbor slot %d holds id %d outside -1..%d", first+int64(j/4), v, n-1)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// entry_point, max_level, efConstruction, efSearch, and upper_beam, which FAISS 1.12.0
	// writes as 1 and reads past (deprecated).
	var fields [5]int32
	for i := range fields {
		if fields[i], err = w.i32("HNSW parameters"); err != nil {
			return err
		}
	}
	entry, maxLevel, efSearch := fields[0], fields[1], fields[3]
	switch {
	case n == 0 && (entry != -1 || maxLevel != -1):
		return w.fail("empty HNSW has entry point %d, max level %d", entry, maxLevel)
	case n > 0 && (entry < 0 || int64(entry) >= n || levels[entry]-1 != maxLevel):
		return w.fail("HNSW entry point %d / max level %d inconsistent with the graph", entry, maxLevel)
	case efSearch < 1 || efSearch > maxEfSearch:
		return w.fail("HNSW efSearch %d out of range 1..%d", efSearch, maxEfSearch)
	}
	storage, err := w.index(hnswStorage)
	if err != nil {
		return err
	}
	if storage.Dim != info.Dim || storage.Ntotal != n {
		return w.fail("HNSW storage holds %d vectors of dimension %d, want %d of %d", storage.Ntotal, storage.Dim, n, info.Dim)
	}
	return nil
}

// hnswOffsets reads the per-vector offsets into the neighbor table: vector i owns
// cum[levels[i]] slots. It returns the table size the offsets imply.
func (w *walker) hnswOffsets(levels, cum []int32) (int64, error) {
	n, err := w.vectorLen(8, "HNSW offsets")
	if err != nil {
		return 0, err
	}
	if n != int64(len(levels))+1 {
		return 0, w.fail("HNSW has %d offsets for %d vectors", n, len(levels))
	}
	var prev uint64
	err = w.scan(n, 8, "HNSW offsets", func(i int64, b []byte) error {
		off := binary.LittleEndian.Uint64(b)
		if i == 0 && off != 0 || i > 0 && off != prev+uint64(cum[levels[i-1]]) {
			return w.fail("HNSW offset %d is %d, inconsistent with the level table", i, off)
		}
		prev = off
		return nil
	})
	return int64(prev), err
}

// ivf reads an IVF index after its header: read_ivf_header, the quantizer of the
// variant, and the inverted lists.
func (w *walker) ivf(info FileInfo) error {
	nlist, err := w.u64("nlist")
	if err != nil {
		return err
	}
	if _, err := w.u64("nprobe"); err != nil {
		return err
	}
	q, err := w.index(quantizer)
	if err != nil {
		return err
	}
	if q.Dim != info.Dim || uint64(q.Ntotal) != nlist {
		return w.fail("IVF quantizer holds %d centroids of dimension %d, want nlist %d of %d", q.Ntotal, q.Dim, nlist, info.Dim)
	}
	if err := w.directMap(); err != nil {
		return err
	}
	var code int64
	switch info.Type {
	case "IwFl":
		code = int64(info.Dim) * 4
	case "IwPQ":
		code, err = w.ivfPQ(info.Dim)
	default: // IwSQ, IwSq
		code, err = w.ivfSQ(info.Type, info.Dim)
	}
	if err != nil {
		return err
	}
	return w.invertedLists(int64(nlist), code, info.Ntotal)
}

// directMap reads read_direct_map: a type byte, an id array, and for type Hashtable (2)
// a vector of id pairs.
func (w *walker) directMap() error {
	kind, err := w.u8("direct map type")
	if err != nil {
		return err
	}
	if kind > 2 {
		return w.fail("unknown direct map type %d", kind)
	}
	if _, err := w.skipVector(8, "direct map"); err != nil {
		return err
	}
	if kind == 2 {
		_, err = w.skipVector(16, "direct map hashtable")
	}
	return err
}

// ivfPQ reads by_residual, code_size and the product quantizer of an IVFPQ index.
func (w *walker) ivfPQ(dim int) (int64, error) {
	if _, err := w.u8("by_residual"); err != nil {
		return 0, err
	}
	code, err := w.u64("code size")
	if err != nil {
		return 0, err
	}
	var f [3]uint64 // pq.d, pq.M, pq.nbits
	for i := range f {
		if f[i], err = w.u64("product quantizer"); err != nil {
			return 0, err
		}
	}
	d, m, nbits := f[0], f[1], f[2]
	if d != uint64(dim) || m == 0 || d%m != 0 || nbits == 0 || nbits > 16 {
		return 0, w.fail("product quantizer d=%d M=%d nbits=%d invalid for dimension %d", d, m, nbits, dim)
	}
	if want := (m*nbits + 7) / 8; code != want {
		return 0, w.fail("IVFPQ code size %d, want %d for M=%d nbits=%d", code, want, m, nbits)
	}
	centroids, err := w.skipVector(4, "product quantizer centroids")
	if err != nil {
		return 0, err
	}
	if uint64(centroids) != d<<nbits {
		return 0, w.fail("product quantizer holds %d centroid floats, want %d", centroids, d<<nbits)
	}
	return int64(code), nil
}

// ivfSQ reads the scalar quantizer, code size and (IwSq only) by_residual of an IVFSQ index.
func (w *walker) ivfSQ(tag string, dim int) (int64, error) {
	code, err := w.scalarQuantizer(dim)
	if err != nil {
		return 0, err
	}
	stored, err := w.u64("code size")
	if err != nil {
		return 0, err
	}
	if int64(stored) != code {
		return 0, w.fail("IVFSQ code size %d, want %d", stored, code)
	}
	if tag == "IwSq" {
		_, err = w.u8("by_residual")
	}
	return code, err
}

// invertedLists reads read_InvertedLists for array lists ("ilar"): nlist, code size, the
// list sizes ("full" or "sprs"), then each list's codes and ids.
func (w *walker) invertedLists(nlist, code, ntotal int64) error {
	tag, err := w.tag("inverted lists type")
	if err != nil {
		return err
	}
	if tag != "ilar" {
		return w.fail("unsupported inverted lists type %q (needle reads in-file array lists, \"ilar\")", tag)
	}
	var f [2]uint64 // nlist, code_size
	for i := range f {
		if f[i], err = w.u64("inverted lists"); err != nil {
			return err
		}
	}
	if f[0] != uint64(nlist) || f[1] != uint64(code) {
		return w.fail("inverted lists have nlist %d, code size %d; want %d, %d", f[0], f[1], nlist, code)
	}
	sizes, err := w.listSizes(nlist)
	if err != nil {
		return err
	}
	var total int64
	for _, s := range sizes {
		total += s
	}
	if total != ntotal {
		return w.fail("inverted lists hold %d vectors, header says %d", total, ntotal)
	}
	if need := total * (code + 8); need > w.size-w.off {
		return w.fail("truncated: inverted lists need %d bytes, %d left", need, w.size-w.off)
	}
	w.off += total * (code + 8)
	return nil
}

// listSizes reads read_ArrayInvertedLists_sizes into a slice of nlist sizes.
func (w *walker) listSizes(nlist int64) ([]int64, error) {
	kind, err := w.tag("list sizes type")
	if err != nil {
		return nil, err
	}
	sizes := make([]int64, nlist)
	// Each size must fit in the file on its own, so that their sum cannot overflow.
	setSize := func(list int64, s uint64) error {
		if s > uint64(w.size) {
			return w.fail("inverted list %d claims %d vectors", list, s)
		}
		sizes[list] = int64(s)
		return nil
	}
	switch kind {
	case "full":
		n, err := w.vectorLen(8, "list sizes")
		if err != nil {
			return nil, err
		}
		if n != nlist {
			return nil, w.fail("%d list sizes for %d lists", n, nlist)
		}
		err = w.scan(n, 8, "list sizes", func(i int64, b []byte) error {
			return setSize(i, binary.LittleEndian.Uint64(b))
		})
		return sizes, err
	case "sprs":
		n, err := w.vectorLen(16, "sparse list sizes") // (list, size) pairs of size_t
		if err != nil {
			return nil, err
		}
		err = w.scan(n, 16, "sparse list sizes", func(_ int64, b []byte) error {
			list := binary.LittleEndian.Uint64(b)
			if list >= uint64(nlist) {
				return w.fail("sparse list sizes name list %d of %d", list, nlist)
			}
			return setSize(int64(list), binary.LittleEndian.Uint64(b[8:]))
		})
		return sizes, err
	}
	return nil, w.fail("unknown list sizes type %q", kind)
}
