package faissgo

/*
#include <stdlib.h>
#include <faiss/c_api/index_io_c.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"

	"needle/internal/atomicfile"
)

// Read loads the index file at path after checking its format (Stat). With mmap, the inverted
// lists of an IVF index stay in the file, mapped read-only (FAISS's IO_FLAG_MMAP), and the index
// refuses Train and Add; flat and HNSW data are loaded into RAM whatever mmap says (FAISS 1.12.0
// can map them too, with IO_FLAG_MMAP_IFC, which needle does not pass yet). The file must not
// change while an mmapped index is open.
func Read(path string, mmap bool) (*Index, error) {
	Init(0)
	if _, err := Stat(path); err != nil {
		return nil, err
	}
	return readUnchecked(path, mmap)
}

// ioFlagMmap is FAISS's C++ IO_FLAG_MMAP (faiss/index_io.h: IO_FLAG_SKIP_IVF_DATA |
// 0x646f0000, which selects the "ilod" mmap reader for inverted lists). The C API's
// FAISS_IO_FLAG_MMAP is 1, a bit the reader ignores (1.7.3 and 1.12.0): passing it silently
// loads everything into RAM (go-faiss's IOFlagMmap has that problem).
const ioFlagMmap = 8 | 0x646f0000

// readUnchecked has FAISS read path without checking the format first.
func readUnchecked(path string, mmap bool) (*Index, error) {
	flags := C.int(0)
	if mmap {
		flags = ioFlagMmap
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var ptr *C.FaissIndex
	var buf [errLen]C.char
	if st := C.needle_read_index(cpath, flags, &ptr, &buf[0], errLen); st != 0 {
		return nil, fmt.Errorf("faissgo: read index %s: %w", path, faissError(st, buf[:]))
	}
	return &Index{ptr: ptr, dim: int(C.faiss_Index_d(ptr)), name: path, readOnly: mmap}, nil
}

// WriteFile writes the index to path atomically (atomicfile.Create: FAISS writes the
// temporary file in the same folder, which is fsynced and renamed over path, and the folder
// is fsynced). On error (a full disk included) no file is left at path (an existing one is
// untouched) and the temporary file is removed.
func (x *Index) WriteFile(path string) error {
	if err := atomicfile.Create(path, x.writeTo); err != nil {
		return fmt.Errorf("faissgo: write index %s: %w", path, err)
	}
	return nil
}

// writeTo has FAISS write the index into f.
func (x *Index) writeTo(f *os.File) error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.ptr == nil {
		return errClosed
	}
	var buf [errLen]C.char
	if st := C.needle_write_index_fd(x.ptr, C.int(f.Fd()), &buf[0], errLen); st != 0 {
		return faissError(st, buf[:])
	}
	return nil
}
