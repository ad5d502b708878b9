package wire

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/klauspost/compress/zstd"

	"needle/kernels/trainer/delta"
)

// The record codec: the one format of the delta of a chunk of a tensor, for the weights
// protocol and for delta files alike. The kernels of kernels/trainer/delta find the changed
// elements (delta.Encode) and scatter them (delta.Apply); this file turns their entries into
// record bytes and back, and checks every field of a record before it touches a tensor.

// Format is how one delta record is laid out.
type Format int

const (
	// AstraFlow is AstraFlow's delta format (docs/en/architecture/delta-weight-transfer.md,
	// struct "<QHHi"): little-endian header {u64 nnz, u16 elem_size, u16 flags, i32 reserved=0},
	// then nnz indices (u32, or u64 when flags bit 0 is set: tensors over 2^32-1
	// elements), then nnz raw new values.
	AstraFlow Format = iota
	// Packed is needle's chunkMap: gap-coded indices narrowed to 1, 2 or 4 bytes and the
	// values split into byte planes, zstd-compressed; or the raw new tensor ("dense")
	// when that is smaller. See "Packed record format" below.
	Packed
)

func (f Format) String() string {
	if f == Packed {
		return "packed"
	}
	return "astraflow"
}

// ParseFormat reads "astraflow" or "packed" ("compact", its name before needle's index forms
// took that word, is still read: scripts may pass it).
func ParseFormat(s string) (Format, error) {
	switch s {
	case "astraflow":
		return AstraFlow, nil
	case "packed", "compact":
		return Packed, nil
	}
	return 0, fmt.Errorf("unknown delta format %q (want astraflow or packed)", s)
}

// Set is ParseFormat into f: a Format is a flag.Value (the --format of options tables).
func (f *Format) Set(s string) error {
	v, err := ParseFormat(s)
	if err == nil {
		*f = v
	}
	return err
}

const (
	astraHeaderLen  = 16
	astraFlagIndex8 = 1 // flags bit 0: indices are u64
)

// AppendRecord appends the record of s, the delta of a tensor from oldBits to newBits, in
// format f to dst. AstraFlow's needs only newBits' values (in s); the packed format reads
// oldBits too (which high bytes a change kept) and builds its payload in *scratch before
// compressing it (nil: a new one each call).
func AppendRecord(dst []byte, f Format, s *delta.Sparse, oldBits, newBits []byte, scratch *[]byte) ([]byte, error) {
	if f == Packed {
		return appendPacked(dst, s, oldBits, newBits, scratch)
	}
	dst = binary.LittleEndian.AppendUint64(dst, uint64(s.Count()))
	dst = binary.LittleEndian.AppendUint16(dst, uint16(s.ElemSize))
	var flags uint16
	if s.IndexSize == 8 {
		flags = astraFlagIndex8
	}
	dst = binary.LittleEndian.AppendUint16(dst, flags)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	return append(append(dst, s.Indices...), s.Values...), nil
}

// ParseAstraFlow reads an AstraFlow record for a tensor of n elements of elemSize bytes.
// The returned Sparse views rec. Any mismatch (element size, flags, length, count) is an
// error naming the field.
func ParseAstraFlow(rec []byte, n int64, elemSize int) (delta.Sparse, error) {
	if len(rec) < astraHeaderLen {
		return delta.Sparse{}, fmt.Errorf("astraflow record of %d bytes is shorter than its %d-byte header", len(rec), astraHeaderLen)
	}
	nnz := binary.LittleEndian.Uint64(rec[0:])
	es := int(binary.LittleEndian.Uint16(rec[8:]))
	flags := binary.LittleEndian.Uint16(rec[10:])
	reserved := int32(binary.LittleEndian.Uint32(rec[12:]))
	switch {
	case es != elemSize:
		return delta.Sparse{}, fmt.Errorf("astraflow elem_size is %d, tensor has %d-byte elements", es, elemSize)
	case flags&^astraFlagIndex8 != 0:
		return delta.Sparse{}, fmt.Errorf("astraflow flags 0x%x has unknown bits", flags)
	case reserved != 0:
		return delta.Sparse{}, fmt.Errorf("astraflow reserved field is %d, want 0", reserved)
	case nnz > uint64(n):
		return delta.Sparse{}, fmt.Errorf("astraflow nnz %d exceeds the tensor's %d elements", nnz, n)
	}
	is := 4
	if flags&astraFlagIndex8 != 0 {
		is = 8
	}
	body := uint64(len(rec) - astraHeaderLen)
	if want := nnz * uint64(is+es); body != want {
		return delta.Sparse{}, fmt.Errorf("astraflow record has %d bytes after the header, nnz %d needs %d", body, nnz, want)
	}
	cut := astraHeaderLen + int(nnz)*is
	return delta.Sparse{Len: n, ElemSize: es, IndexSize: is, Indices: rec[astraHeaderLen:cut], Values: rec[cut:]}, nil
}

// ApplyRecord applies rec (format f) to base, a tensor of elemSize-byte elements, in place,
// and returns the number of elements the record changes. The record is fully decoded and
// checked first: on error base is untouched. scratch (may be nil) holds decoded packed
// entries and is reused across calls.
func ApplyRecord(base []byte, elemSize int, f Format, rec []byte, scratch *delta.Sparse, threads int) (int64, error) {
	if err := delta.CheckElemSize(elemSize); err != nil {
		return 0, err
	}
	if len(base)%elemSize != 0 {
		return 0, fmt.Errorf("tensor of %d bytes is not a whole number of %d-byte elements", len(base), elemSize)
	}
	n := int64(len(base) / elemSize)
	if f == AstraFlow {
		s, err := ParseAstraFlow(rec, n, elemSize)
		if err != nil {
			return 0, err
		}
		return s.Count(), delta.Apply(base, &s, threads)
	}
	if scratch == nil {
		scratch = &delta.Sparse{}
	}
	dense, nnz, low, exceptions, err := decodePacked(rec, n, elemSize, scratch)
	if err != nil {
		return 0, err
	}
	if dense != nil {
		copy(base, dense)
		return nnz, nil
	}
	// Version 2 writes the low bytes of every entry, then the exceptions' whole values; reading
	// the base's high bytes instead costs a cache miss per entry (apply 3.3x slower, measured).
	if err := delta.ApplyLow(base, scratch, low, threads); err != nil {
		return 0, err
	}
	es := int64(elemSize)
	for _, k := range exceptions {
		i := int64(scratch.Index(k)) * es
		copy(base[i:i+es], scratch.Values[k*es:(k+1)*es])
	}
	return nnz, nil
}

// Packed record format, little-endian:
//
//	0  magic "NDLC" (the C of its first name, compact: the bytes of existing records stay)
//	4  u8 version: 2 (written), 1 (read: what senders without version 2 write)
//	5  u8 kind: 1 sparse, 2 dense
//	6  u8 gap width: 1, 2 or 4 (sparse), 0 (dense)
//	7  u8 element size
//	8  u64 elements in the tensor
//	16 u64 changed elements (nnz)
//	24 u64 payload length before compression
//	32 payload: sparse = zstd(gaps || low byte planes || exceptions); dense = the raw new tensor
//
// Gaps: entry k stores idx[k] - idx[k-1] - 1 (entry 0 stores idx[0]) in width w bytes; a
// gap >= M = 2^(8w)-1 is written as floor(gap/M) words of M then the remainder. The encoder
// writes the width of the shortest gap stream (the narrowest of equal ones). The payload is
// written by the native kernel nl_delta_packed_payload (kernels/trainer/delta/packed.c,
// tested against a Go restatement of this format); it is read here. Byte planes:
// byte 0 of every new value, then byte 1, ... (zstd finds the repeated bytes).
//
// Version 2 stores the planes of the low half of each value only (byte 0 of bf16/fp16, bytes
// 0-1 of fp32): an optimizer step changes the low mantissa bits and leaves sign and exponent,
// so the high half is the base's. Exceptions list the entries whose high half changed: a
// uvarint count, then per exception the uvarint of its entry number minus the previous one's
// minus 1, and its new high bytes. On 1%-changed bf16 weights this takes records from half of
// AstraFlow's bytes to a third. A record stays idempotent (a chunk may get its record twice
// when a transfer resumes): its bytes never depend on the base's bytes that it changes.
// Version 1 stores every plane and no exceptions.
const (
	packedMagic   = "NDLC"
	packedVersion = 2
	packedSparse  = 1
	packedDense   = 2
	packedHdrLen  = 32
)

// The shared coder's concurrency is how many EncodeAll (DecodeAll) calls run at once: the
// others wait for one of its coders, so it must not be below the goroutines that encode
// (apply) chunks.
var (
	zenc = sync.OnceValue(func() *zstd.Encoder {
		e, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)))
		return e
	})
	zdec = sync.OnceValue(func() *zstd.Decoder {
		d, _ := zstd.NewReader(nil, zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)))
		return d
	})
)

func gapMax(w int) uint64 { return 1<<(8*uint(w)) - 1 }

// lowBytes is the bytes of each value a version's planes hold for every entry.
func lowBytes(version, elemSize int) int {
	if version == 1 {
		return elemSize
	}
	return elemSize / 2
}

func putPackedHeader(dst []byte, version, kind, w, elemSize int, n, nnz, raw uint64) []byte {
	dst = append(dst, packedMagic...)
	dst = append(dst, byte(version), byte(kind), byte(w), byte(elemSize))
	dst = binary.LittleEndian.AppendUint64(dst, n)
	dst = binary.LittleEndian.AppendUint64(dst, nnz)
	return binary.LittleEndian.AppendUint64(dst, raw)
}

// appendPacked appends the packed record (version 2) of s, the delta from oldBits to
// newBits, to dst: sparse, or dense where that is smaller. The payload is built in *scratch
// (kept for the next call) and compressed straight into dst: with room in dst, nothing else is
// allocated or copied.
func appendPacked(dst []byte, s *delta.Sparse, oldBits, newBits []byte, scratch *[]byte) ([]byte, error) {
	if int64(len(newBits)) != s.Len*int64(s.ElemSize) || len(oldBits) != len(newBits) {
		return nil, fmt.Errorf("tensors of %d and %d bytes, delta is for %d elements of %d bytes", len(oldBits), len(newBits), s.Len, s.ElemSize)
	}
	n, nnz, es := uint64(s.Len), uint64(s.Count()), s.ElemSize
	dense := func() []byte {
		return append(putPackedHeader(dst, packedVersion, packedDense, 0, es, n, nnz, uint64(len(newBits))), newBits...)
	}
	if scratch == nil {
		scratch = new([]byte)
	}
	low := lowBytes(packedVersion, es)
	payload, layout, err := delta.AppendPackedPayload((*scratch)[:0], s, oldBits, 0, low, true)
	if err != nil {
		return nil, err
	}
	*scratch = payload
	if uint64(layout.GapBytes)+nnz*uint64(low) >= uint64(len(newBits)) {
		return dense(), nil
	}
	w := layout.Width
	out := putPackedHeader(dst, packedVersion, packedSparse, w, es, n, nnz, uint64(len(payload)))
	out = zenc().EncodeAll(payload, out)
	if len(out)-len(dst)-packedHdrLen >= len(newBits) {
		return dense(), nil
	}
	return out, nil
}

// decodePacked checks a packed record for a tensor of n elements of elemSize bytes and returns
// the number of elements it changes. A dense record returns the new tensor (a view of rec). A
// sparse one fills s and returns low, the bytes of each value it holds (elemSize: whole values;
// version 2: the low half), and the entries whose whole value it holds besides (version 2's
// exceptions, increasing).
func decodePacked(rec []byte, n int64, elemSize int, s *delta.Sparse) (dense []byte, changed int64, low int, exceptions []int64, err error) {
	if len(rec) < packedHdrLen {
		return nil, 0, 0, nil, fmt.Errorf("packed record of %d bytes is shorter than its %d-byte header", len(rec), packedHdrLen)
	}
	version, kind, w, es := int(rec[4]), int(rec[5]), int(rec[6]), int(rec[7])
	rn, nnz, raw := binary.LittleEndian.Uint64(rec[8:]), binary.LittleEndian.Uint64(rec[16:]), binary.LittleEndian.Uint64(rec[24:])
	body := rec[packedHdrLen:]
	switch {
	case string(rec[:4]) != packedMagic:
		return nil, 0, 0, nil, fmt.Errorf("packed record magic is %q, want %q", rec[:4], packedMagic)
	case version != 1 && version != packedVersion:
		return nil, 0, 0, nil, fmt.Errorf("packed record version %d, this build reads 1 and %d", version, packedVersion)
	case es != elemSize:
		return nil, 0, 0, nil, fmt.Errorf("packed record element size is %d, tensor has %d-byte elements", es, elemSize)
	case rn != uint64(n):
		return nil, 0, 0, nil, fmt.Errorf("packed record is for %d elements, tensor has %d", rn, n)
	case nnz > uint64(n):
		return nil, 0, 0, nil, fmt.Errorf("packed record nnz %d exceeds the tensor's %d elements", nnz, n)
	case kind == packedDense:
		if raw != uint64(n)*uint64(es) || uint64(len(body)) != raw {
			return nil, 0, 0, nil, fmt.Errorf("dense packed record has %d bytes (header says %d), tensor has %d", len(body), raw, uint64(n)*uint64(es))
		}
		return body, int64(nnz), 0, nil, nil
	case kind != packedSparse:
		return nil, 0, 0, nil, fmt.Errorf("packed record kind %d is not 1 (sparse) or 2 (dense)", kind)
	case w != 1 && w != 2 && w != 4:
		return nil, 0, 0, nil, fmt.Errorf("packed record gap width %d is not 1, 2 or 4", w)
	}
	low = lowBytes(version, es)
	planes := nnz * uint64(low)
	// Every entry takes at least one gap word; escapes add at most n/M words in total; version
	// 2's exceptions take at most a count and, per entry, a 10-byte uvarint and its high bytes.
	lo, hi := planes+nnz*uint64(w), planes+(nnz+uint64(n)/gapMax(w)+1)*uint64(w)
	if version == 2 {
		lo, hi = lo+1, hi+10+nnz*uint64(10+es-low)
	}
	if raw < lo || raw > hi {
		return nil, 0, 0, nil, fmt.Errorf("packed record payload length %d is outside [%d, %d] for nnz %d", raw, lo, hi, nnz)
	}
	payload, err := zdec().DecodeAll(body, make([]byte, 0, raw))
	if err != nil {
		return nil, 0, 0, nil, fmt.Errorf("packed record payload: %w", err)
	}
	if uint64(len(payload)) != raw {
		return nil, 0, 0, nil, fmt.Errorf("packed record payload decompressed to %d bytes, header says %d", len(payload), raw)
	}
	is := delta.IndexSizeFor(n)
	*s = delta.Sparse{Len: n, ElemSize: es, IndexSize: is, Indices: slices.Grow(s.Indices[:0], int(nnz)*is+8), Values: slices.Grow(s.Values[:0], int(nnz)*es)}
	s.Values = s.Values[:nnz*uint64(es)]
	// The gap stream ends where the planes (and exceptions) leave off: at most raw - planes.
	gaps := payload[:raw-planes]
	prev, m, pos := int64(-1), gapMax(w), 0
	for k := range nnz {
		var g uint64
		for {
			if pos+w > len(gaps) {
				return nil, 0, 0, nil, fmt.Errorf("packed record gap stream ends at entry %d of %d", k, nnz)
			}
			v := readWord(gaps[pos:], w)
			pos += w
			g += v
			if g >= uint64(n) {
				return nil, 0, 0, nil, fmt.Errorf("packed record entry %d: gap %d out of range for %d elements", k, g, n)
			}
			if v != m {
				break
			}
		}
		idx := uint64(prev+1) + g
		if idx >= uint64(n) {
			return nil, 0, 0, nil, fmt.Errorf("packed record entry %d: index %d out of range for %d elements", k, idx, n)
		}
		prev = int64(idx)
		s.Indices = binary.LittleEndian.AppendUint64(s.Indices, idx)[:len(s.Indices)+is]
	}
	rest := payload[pos:]
	if version == 1 && uint64(len(rest)) != planes {
		return nil, 0, 0, nil, fmt.Errorf("packed record has %d gap bytes after entry %d", uint64(len(rest))-planes, nnz)
	}
	for b := range low {
		plane := rest[uint64(b)*nnz : uint64(b+1)*nnz]
		for k, v := range plane {
			s.Values[k*es+b] = v
		}
	}
	if version == 2 {
		if exceptions, err = readExceptions(rest[planes:], s, low); err != nil {
			return nil, 0, 0, nil, fmt.Errorf("packed record exceptions: %w", err)
		}
	}
	return nil, int64(nnz), low, exceptions, nil
}

// readExceptions reads a version-2 record's exceptions (all of ex, nothing after them) into
// the high bytes of s's values and returns their entry numbers.
func readExceptions(ex []byte, s *delta.Sparse, low int) ([]int64, error) {
	count, c := binary.Uvarint(ex)
	nnz, high := uint64(s.Count()), s.ElemSize-low
	if c <= 0 || count > nnz {
		return nil, fmt.Errorf("count unreadable or above the %d entries", nnz)
	}
	ex = ex[c:]
	entries := make([]int64, 0, count)
	k := int64(-1)
	for e := range count {
		gap, c := binary.Uvarint(ex)
		if c <= 0 || gap >= nnz || uint64(k+1)+gap >= nnz || len(ex)-c < high {
			return nil, fmt.Errorf("exception %d of %d is cut or past the last entry", e, count)
		}
		k += int64(gap) + 1
		copy(s.Values[k*int64(s.ElemSize)+int64(low):(k+1)*int64(s.ElemSize)], ex[c:c+high])
		entries = append(entries, k)
		ex = ex[c+high:]
	}
	if len(ex) != 0 {
		return nil, fmt.Errorf("%d bytes after the last exception", len(ex))
	}
	return entries, nil
}

func readWord(b []byte, w int) uint64 {
	switch w {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	}
	return uint64(binary.LittleEndian.Uint32(b))
}
