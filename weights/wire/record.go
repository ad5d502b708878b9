package wire

import (
	"encoding/binary"
	"fmt"
)

// Op is how a record's body rebuilds its chunk.
type Op uint8

const (
	OpRaw       Op = 1 // the body is the chunk's bytes
	OpPacked    Op = 2 // the body is a packed delta record (codec.go) against the base chunk
	OpAstraFlow Op = 3 // the body is an AstraFlow delta record against the base chunk
)

// RecordHeaderLen is the size of a record's header, before its body:
//
//	0  u32 chunk: the record's index in version To's chunk map (chunkmap.go)
//	4  u8  op
//	5  u8  element size the delta compares (2 or 4); 0 for OpRaw
//	6  u16 0
const RecordHeaderLen = 8

// Record is one chunk of version To. Body views the frame payload it was parsed from.
type Record struct {
	Chunk    int
	Op       Op
	ElemSize int
	Body     []byte
}

// OpFor is the record op that carries a delta of format f.
func OpFor(f Format) Op {
	if f == AstraFlow {
		return OpAstraFlow
	}
	return OpPacked
}

// Format is the delta format of a delta op.
func (o Op) Format() Format {
	if o == OpAstraFlow {
		return AstraFlow
	}
	return Packed
}

// AppendRecordHeader appends a record header to dst.
func AppendRecordHeader(dst []byte, chunk int, op Op, elemSize int) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(chunk))
	return append(dst, byte(op), byte(elemSize), 0, 0)
}

// ParseRecord reads a record from a KindRecord payload and checks its header's fields.
// Whether the body fits its chunk is for the applier to check (it knows the chunk map).
func ParseRecord(payload []byte) (Record, error) {
	if len(payload) < RecordHeaderLen {
		return Record{}, fmt.Errorf("record of %d bytes is shorter than its %d-byte header", len(payload), RecordHeaderLen)
	}
	r := Record{Chunk: int(binary.LittleEndian.Uint32(payload)), Op: Op(payload[4]), ElemSize: int(payload[5]), Body: payload[RecordHeaderLen:]}
	switch {
	case payload[6] != 0 || payload[7] != 0:
		return Record{}, fmt.Errorf("record of chunk %d: reserved bytes are %d, %d, want 0", r.Chunk, payload[6], payload[7])
	case r.Op == OpRaw && r.ElemSize != 0:
		return Record{}, fmt.Errorf("raw record of chunk %d has element size %d, want 0", r.Chunk, r.ElemSize)
	case (r.Op == OpPacked || r.Op == OpAstraFlow) && r.ElemSize != 2 && r.ElemSize != 4:
		return Record{}, fmt.Errorf("delta record of chunk %d has element size %d, want 2 or 4", r.Chunk, r.ElemSize)
	case r.Op != OpRaw && r.Op != OpPacked && r.Op != OpAstraFlow:
		return Record{}, fmt.Errorf("record of chunk %d has unknown op %d", r.Chunk, r.Op)
	}
	return r, nil
}
