// Package mapfile maps a whole file into memory (MAP_SHARED): the weight-transfer parts read
// and write versions of a model in place this way (the sender's halves, a receiver's file,
// the benchmark's buffers). The caller owns the mapping until it calls release.
package mapfile

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Map maps the file at path whole, writable when write is set (writes reach the file). With
// populate the kernel fills the page tables up front (MAP_POPULATE): for a caller that will
// touch every page, one pass instead of a fault per page. An empty file maps to nil.
func Map(path string, write, populate bool) (data []byte, release func(), err error) {
	flag, prot, flags := os.O_RDONLY, unix.PROT_READ, unix.MAP_SHARED
	if write {
		flag, prot = os.O_RDWR, unix.PROT_READ|unix.PROT_WRITE
	}
	if populate {
		flags |= unix.MAP_POPULATE
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if st.Size() == 0 {
		return nil, func() {}, nil
	}
	data, err = unix.Mmap(int(f.Fd()), 0, int(st.Size()), prot, flags)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return data, func() { unix.Munmap(data) }, nil
}
