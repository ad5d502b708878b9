package mapfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMap: writes through a writable mapping reach the file, a read-only mapping sees them, an
// empty file maps to nil and a missing one is an error.
func TestMap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, make([]byte, 10000), 0o644)
	data, release, err := Map(p, true, true)
	if err != nil || len(data) != 10000 {
		t.Fatalf("writable map: %d bytes, %v", len(data), err)
	}
	data[9999] = 7
	release()
	ro, release, err := Map(p, false, false)
	if err != nil || ro[9999] != 7 {
		t.Fatalf("read-only map: %v", err)
	}
	release()
	if b, _ := os.ReadFile(p); b[9999] != 7 {
		t.Fatal("the write did not reach the file")
	}
	os.WriteFile(p, nil, 0o644)
	if data, release, err := Map(p, false, false); err != nil || data != nil {
		t.Fatalf("empty file: %d bytes, %v", len(data), err)
	} else {
		release()
	}
	if _, _, err := Map(p+".missing", false, false); err == nil {
		t.Fatal("a missing file mapped")
	}
}

// TestFile: File maps the first size bytes of an open file, and the mapping outlives the file.
func TestFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, []byte("0123456789"), 0o644)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	data, err := File(f, 4, false, false)
	f.Close()
	if err != nil || string(data) != "0123" {
		t.Fatalf("%q, %v", data, err)
	}
	if data, err := File(f, 0, false, false); data != nil || err != nil {
		t.Fatalf("size 0: %q, %v", data, err)
	}
}

// TestReserve: a file grows to its size with its blocks allocated, shrinks to a smaller one,
// and a read-only file is an error naming it.
func TestReserve(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, size := range []int64{1 << 20, 100, 0} {
		if err := Reserve(f, size); err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		if st.Size() != size {
			t.Fatalf("reserved %d bytes, the file has %d", size, st.Size())
		}
	}
	if err := Reserve(f, 1<<20); err != nil {
		t.Fatal(err)
	}
	if st, _ := f.Stat(); st.Sys().(*syscall.Stat_t).Blocks*512 < 1<<20 {
		t.Fatalf("%d bytes allocated for 1 MiB reserved", st.Sys().(*syscall.Stat_t).Blocks*512)
	}
	ro, _ := os.Open(p)
	defer ro.Close()
	if err := Reserve(ro, 10); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("read-only file: %v", err)
	}
}

// TestCopy: a file of several pieces and a ragged end arrives whole, an empty one copies
// nothing, and a read-only destination is an error naming both files.
func TestCopy(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	want := make([]byte, 2*copyPiece+12345)
	for i := range want {
		want[i] = byte(i*31 + i>>13)
	}
	os.WriteFile(src, want, 0o644)
	dst, err := os.Create(filepath.Join(dir, "dst"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if n, err := Copy(dst, src); err != nil || n != int64(len(want)) {
		t.Fatalf("copied %d bytes, %v", n, err)
	}
	if got, _ := os.ReadFile(dst.Name()); string(got) != string(want) {
		t.Fatal("the copy differs from its source")
	}
	os.WriteFile(src, nil, 0o644)
	if n, err := Copy(dst, src); err != nil || n != 0 {
		t.Fatalf("empty source: %d bytes, %v", n, err)
	}
	os.WriteFile(src, want[:100], 0o644)
	ro, _ := os.Open(dst.Name())
	defer ro.Close()
	if _, err := Copy(ro, src); err == nil || !strings.Contains(err.Error(), src) || !strings.Contains(err.Error(), dst.Name()) {
		t.Fatalf("read-only destination: %v", err)
	}
}
