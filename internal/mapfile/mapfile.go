// Package mapfile maps files into memory (MAP_SHARED), the one place needle calls mmap: the
// flat index and the docstore read their files this way, safetensors and delta files are read
// in place, and the weight-transfer parts read and write versions of a model (the sender's
// halves, a receiver's file, the benchmark's buffers). The caller owns a mapping until it
// releases it (Map's release; unix.Munmap of File's bytes).
package mapfile

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Map maps the file at path whole, writable when write is set (writes reach the file). With
// populate the kernel fills the page tables up front (MAP_POPULATE): for a caller that will
// touch every page, one pass instead of a fault per page. An empty file maps to nil.
func Map(path string, write, populate bool) (data []byte, release func(), err error) {
	f, data, err := open(path, write, populate)
	if err != nil {
		return nil, nil, err
	}
	f.Close() // the mapping outlives it
	return data, func() { unmap(data) }, nil
}

// MapOpen is Map read-only that keeps the file open: f serves system calls on the mapped bytes
// (sendfile), and release unmaps and closes it.
func MapOpen(path string, populate bool) (f *os.File, data []byte, release func(), err error) {
	if f, data, err = open(path, false, populate); err != nil {
		return nil, nil, nil, err
	}
	return f, data, func() {
		unmap(data)
		f.Close()
	}, nil
}

// open opens the file at path and maps it whole (Map's write and populate); the caller closes f.
func open(path string, write, populate bool) (*os.File, []byte, error) {
	flag := os.O_RDONLY
	if write {
		flag = os.O_RDWR
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	var data []byte
	if err == nil {
		data, err = File(f, st.Size(), write, populate)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, data, nil
}

// unmap releases a mapping made here (nil: an empty file, nothing mapped).
func unmap(data []byte) {
	if data != nil {
		unix.Munmap(data)
	}
}

// File maps the first size bytes of the open file f (write and populate as for Map); the
// mapping stays valid after f is closed. Size 0 maps to nil. The error names the file.
func File(f *os.File, size int64, write, populate bool) ([]byte, error) {
	if size == 0 {
		return nil, nil
	}
	if size < 0 || int64(int(size)) != size {
		return nil, fmt.Errorf("mmap %s: %d bytes do not fit the address space", f.Name(), size)
	}
	prot, flags := unix.PROT_READ, unix.MAP_SHARED
	if write {
		prot |= unix.PROT_WRITE
	}
	if populate {
		flags |= unix.MAP_POPULATE
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), prot, flags)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	return data, nil
}

// Reserve makes f size bytes long with their space reserved (fallocate), so that writes
// through a mapping of it never meet a full disk: that error comes here instead of as a
// SIGBUS on some later write. A file system without fallocate only gets the size set.
func Reserve(f *os.File, size int64) error {
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("size %s to %d bytes: %w", f.Name(), size, err)
	}
	if size == 0 {
		return nil
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("reserve %d bytes for %s: %w", size, f.Name(), err)
	}
	return nil
}

// copyPiece is how many bytes Copy writes per call.
const copyPiece = 8 << 20

// Copy writes the whole file at src into dst from offset 0 and returns its size: src is mapped
// read-only and written with pwrite, one copy per byte. io.Copy between two files would ask
// the kernel for copy_file_range, which tmpfs lacks: its fallback splices page by page, 4-5 s
// for 3.09 GB on a 2-core Zen 4 where this takes about a second (docs/measurements/
// 2026-11-28-weights-full-versions.md).
func Copy(dst *os.File, src string) (int64, error) {
	data, release, err := Map(src, false, true)
	if err != nil {
		return 0, err
	}
	defer release()
	for off := 0; off < len(data); off += copyPiece {
		if _, err := dst.WriteAt(data[off:min(off+copyPiece, len(data))], int64(off)); err != nil {
			return 0, fmt.Errorf("copy %s to %s: %w", src, dst.Name(), err)
		}
	}
	return int64(len(data)), nil
}
