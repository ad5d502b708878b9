package cuda

import (
	"encoding/binary"
	"fmt"
)

// FatbinEntry is one image of a fatbin: machine code (ELF) for one GPU architecture, or PTX
// that the driver compiles for the GPU it finds.
type FatbinEntry struct {
	PTX  bool // PTX text (compute_NN); false: an ELF cubin (sm_NN)
	Arch int  // 80 for sm_80 / compute_80
}

func (e FatbinEntry) String() string {
	if e.PTX {
		return fmt.Sprintf("compute_%d PTX", e.Arch)
	}
	return fmt.Sprintf("sm_%d ELF", e.Arch)
}

// FatbinEntries lists the images of a fatbin as nvcc -fatbin writes it (fatbinary_section.h's
// header: magic 0xBA55ED50, version, header size, payload size; then per image a header whose
// first fields are kind (1 PTX, 2 ELF), version, header size, payload size, and whose word at
// byte 28 is the architecture). Lets a machine without a GPU check what a fatbin carries.
func FatbinEntries(b []byte) ([]FatbinEntry, error) {
	const magic, headerMin, entryMin = 0xBA55ED50, 16, 32
	if len(b) < headerMin || binary.LittleEndian.Uint32(b) != magic {
		return nil, fmt.Errorf("not a fatbin (%d bytes, no magic %#x)", len(b), uint32(magic))
	}
	hs := int(binary.LittleEndian.Uint16(b[6:]))
	end := uint64(hs) + binary.LittleEndian.Uint64(b[8:])
	if hs < headerMin || end > uint64(len(b)) {
		return nil, fmt.Errorf("fatbin header: size %d + %d past its %d bytes", hs, end-uint64(hs), len(b))
	}
	var out []FatbinEntry
	for off := uint64(hs); off < end; {
		if end-off < entryMin {
			return nil, fmt.Errorf("fatbin image at byte %d: %d bytes left, want a %d-byte header", off, end-off, entryMin)
		}
		e := b[off:end]
		kind, ehs, size := binary.LittleEndian.Uint16(e), uint64(binary.LittleEndian.Uint32(e[4:])), binary.LittleEndian.Uint64(e[8:])
		if kind != 1 && kind != 2 || ehs < entryMin || ehs+size > end-off {
			return nil, fmt.Errorf("fatbin image at byte %d: kind %d, header %d and payload %d bytes of %d left", off, kind, ehs, size, end-off)
		}
		out = append(out, FatbinEntry{PTX: kind == 1, Arch: int(binary.LittleEndian.Uint32(e[28:]))})
		off += ehs + size
	}
	return out, nil
}
