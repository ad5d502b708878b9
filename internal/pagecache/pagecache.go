// Package pagecache is the rule needle's passes over large files follow (the mapped flat
// index's scans, the streams of `needle build --embeddings` and `needle convert`): a file
// larger than half of RAM cannot stay in the page cache, so reading it through would evict
// everything else on the machine for pages that will not be read again before they are
// evicted themselves. Such a file is dropped from the cache behind the reader.
package pagecache

import (
	"os"

	"golang.org/x/sys/unix"
)

// TooLarge reports whether a file of size bytes is larger than half of the machine's RAM
// (when RAM is unknown: never).
func TooLarge(size int64) bool {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return false
	}
	return size > int64(si.Totalram)*int64(si.Unit)/2
}

// Drop advises the kernel to drop bytes [off, off+n) of f from the page cache (advice only:
// failure is ignored).
func Drop(f *os.File, off, n int64) {
	_ = unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED)
}
