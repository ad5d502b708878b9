package faissgo

import (
	"encoding/binary"
	"fmt"
	"io"

	"needle/internal/writer"
)

// FlatHeaderBytes is the size of a flat index file before its vectors.
const FlatHeaderBytes = 4 + 4 + 8 + 8 + 8 + 1 + 4 + 8

// WriteFlat writes an IndexFlatIP (m = IP) or IndexFlatL2 (m = L2) file of ntotal vectors of
// dim floats to w, byte for byte what faiss.write_index writes (faiss/impl/index_write.cpp:
// fourcc, then d i32, ntotal i64, two unused i64 of 1<<20, is_trained u8, metric i32, then
// the vector data as a u64 float count and the floats). vectors writes the data to its
// writer as little-endian float32s, row after row; it must write exactly ntotal*dim floats.
// The data is streamed, never held: `needle build` writes indexes larger than RAM this way,
// where FAISS would need the whole index in memory.
func WriteFlat(w io.Writer, m Metric, dim int, ntotal int64, vectors func(data io.Writer) error) error {
	var fourcc string
	switch m {
	case IP:
		fourcc = "IxFI"
	case L2:
		fourcc = "IxF2"
	default:
		return fmt.Errorf("faissgo: flat index: unsupported %v", m)
	}
	if dim <= 0 || dim > maxDim || ntotal < 0 {
		return fmt.Errorf("faissgo: flat index: dimension %d (want 1..%d) and %d vectors", dim, maxDim, ntotal)
	}
	floats := uint64(ntotal) * uint64(dim)
	head := make([]byte, 0, FlatHeaderBytes)
	head = append(head, fourcc...)
	head = binary.LittleEndian.AppendUint32(head, uint32(dim))
	head = binary.LittleEndian.AppendUint64(head, uint64(ntotal))
	head = binary.LittleEndian.AppendUint64(head, 1<<20)
	head = binary.LittleEndian.AppendUint64(head, 1<<20)
	head = append(head, 1) // is_trained
	head = binary.LittleEndian.AppendUint32(head, uint32(m))
	head = binary.LittleEndian.AppendUint64(head, floats)
	if _, err := w.Write(head); err != nil {
		return err
	}
	data := &writer.Counting{W: w}
	if err := vectors(data); err != nil {
		return err
	}
	if uint64(data.N) != 4*floats {
		return fmt.Errorf("faissgo: flat index: %d bytes of vectors written, want %d (%d x %d floats)", data.N, 4*floats, ntotal, dim)
	}
	return nil
}
