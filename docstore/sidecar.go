package docstore

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"needle/internal/mapfile"
)

// Options says where sidecars live and who hears about their (re)building.
// Sidecars: <file>.needle-offsets (corpus and pages: 64-byte header + 8 bytes a line) and
// <file>.needle-urls (pages: the url hash table, 48 to 96 bytes a line).
type Options struct {
	// SidecarDir is the folder for the sidecar files. "" means next to the data file, or
	// $NEEDLE_CACHE/docstore/<hash of the data file's absolute path> when that folder is
	// not writable.
	SidecarDir string
	// Progress, if set, is called from the building goroutine while a sidecar is built,
	// with bytes of the data file done and its total size.
	Progress func(done, total int64)
}

// fingerprint identifies one version of a data file: a sidecar is fresh only when all of it
// matches. The sample hash covers the first and last sampleBytes, so a rewrite that keeps
// size and mtime (cp -p, a restored backup) is still caught at the file's ends.
type fingerprint struct {
	size  int64
	mtime int64 // ns since the epoch
	hash  [16]byte
}

const sampleBytes = 4 << 20

func fingerprintOf(f *os.File) (fingerprint, error) {
	st, err := f.Stat()
	if err != nil {
		return fingerprint{}, err
	}
	fp := fingerprint{size: st.Size(), mtime: st.ModTime().UnixNano()}
	h := sha256.New()
	head := min(fp.size, sampleBytes)
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, head)); err != nil {
		return fingerprint{}, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	tail := max(head, fp.size-sampleBytes)
	if _, err := io.Copy(h, io.NewSectionReader(f, tail, fp.size-tail)); err != nil {
		return fingerprint{}, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	copy(fp.hash[:], h.Sum(nil))
	return fp, nil
}

func (fp fingerprint) put(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], uint64(fp.size))
	binary.LittleEndian.PutUint64(b[8:], uint64(fp.mtime))
	copy(b[16:32], fp.hash[:])
}

func getFingerprint(b []byte) fingerprint {
	fp := fingerprint{size: int64(binary.LittleEndian.Uint64(b[0:])), mtime: int64(binary.LittleEndian.Uint64(b[8:]))}
	copy(fp.hash[:], b[16:32])
	return fp
}

// sidecarDirs lists where the sidecars of dataPath may be, in the order they are tried.
func sidecarDirs(dataPath string, opt Options) ([]string, error) {
	if opt.SidecarDir != "" {
		return []string{opt.SidecarDir}, nil
	}
	abs, err := filepath.Abs(dataPath)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(abs))
	cache := filepath.Join(cacheRoot(), "docstore", fmt.Sprintf("%x", sum[:8]))
	return []string{filepath.Dir(abs), cache}, nil
}

// cacheRoot is $NEEDLE_CACHE, default ~/.cache/needle (as `make setup` uses).
func cacheRoot() string {
	if c := os.Getenv("NEEDLE_CACHE"); c != "" {
		return c
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "needle")
	}
	return filepath.Join(os.TempDir(), "needle-cache")
}

// unwritable reports whether err means "this folder cannot take our file", so that the
// next candidate folder should be tried.
func unwritable(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// mapFile maps all of f read-only and shared; the mapping stays valid after f is closed.
// An empty file is an error here: no docstore file is empty.
func mapFile(f *os.File, size int64) ([]byte, error) {
	if size == 0 {
		return nil, fmt.Errorf("mmap %s: empty file", f.Name())
	}
	return mapfile.File(f, size, false, false)
}

// dropResident tells the kernel that data[from:to] (rounded inward to pages; data is the
// start of a mapping) is not needed by this process for now: those pages leave its RSS but
// stay in the page cache, and fault back in on the next access. Scans over whole files
// call it behind them so RSS does not grow with the file size.
func dropResident(data []byte, from, to int) {
	page := os.Getpagesize()
	from = (from + page - 1) / page * page
	to = min(to, len(data)) / page * page
	if to > from {
		_ = unix.Madvise(data[from:to], unix.MADV_DONTNEED) // advice only: failure costs RSS, not correctness
	}
}
