package receiver

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"needle/internal/atomicfile"
	"needle/internal/mapfile"
)

// mapped is a file mapped whole; Data writes go to the file (MAP_SHARED).
type mapped struct {
	f    *os.File
	Data []byte
}

// allocate creates path holding size bytes of reserved space (mapfile.Reserve) and maps it
// with its pages populated (a delta's rebase writes them all through the mapping).
func allocate(path string, size int64) (*mapped, error) {
	return reserveAndMap(path, os.O_TRUNC, size, true)
}

// sizeForWrites makes path size bytes long for a full step, whose every byte is written with
// pwrite (the header by fullTarget, the records by wire.Target.File), and maps it: pages an
// existing file at path already holds are kept (overwritten, not freed and allocated again),
// the others come with the writes. Its space is not reserved first: on a version's first
// pull that takes every page at once (0.15-0.35 s for 512 MiB here) before the first record,
// and every host of a chain would add it to the version's way; a full disk is then the error of
// a write (ENOSPC), which nothing meets through the mapping (read only until every page has
// been written). The mapping is not populated: that would zero every fresh page before the
// records overwrite it.
func sizeForWrites(path string, size int64) (*mapped, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return mapFile(f, size, false)
}

func reserveAndMap(path string, flag int, size int64, populate bool) (*mapped, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|flag, 0o644)
	if err != nil {
		return nil, err
	}
	if err := mapfile.Reserve(f, size); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return mapFile(f, size, populate)
}

// openMapped maps an existing file of size bytes for writing.
func openMapped(path string, size int64) (*mapped, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil || st.Size() != size {
		f.Close()
		return nil, fmt.Errorf("%s: %d bytes, want %d (%v)", path, st.Size(), size, err)
	}
	return mapFile(f, size, true)
}

// mapFile maps f writable; populate fills the page tables in one pass up front instead of one
// fault per page while records are applied (a delta at 1% changed writes ~20 elements per
// 4 KiB page).
func mapFile(f *os.File, size int64, populate bool) (*mapped, error) {
	m := &mapped{f: f}
	if size > 0 {
		data, err := mapfile.File(f, size, true, populate)
		if err != nil {
			f.Close()
			return nil, err
		}
		m.Data = data
	}
	return m, nil
}

// close unmaps; with sync the data reaches the disk first (fsync: a no-op on tmpfs).
func (m *mapped) close(sync bool) error {
	var err error
	if m.Data != nil {
		err = unix.Munmap(m.Data)
		m.Data = nil
	}
	if sync && err == nil {
		err = m.f.Sync()
	}
	if cerr := m.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// copyFile makes dst a copy of src (reserved first, then written from a mapping of src:
// mapfile.Copy), atomically: dst appears complete or not at all.
func copyFile(dst, src string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp*")
	if err != nil {
		return err
	}
	err = mapfile.Reserve(tmp, st.Size())
	if err == nil {
		_, err = mapfile.Copy(tmp, src)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return atomicfile.SyncDir(filepath.Dir(dst))
}
