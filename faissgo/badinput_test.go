package faissgo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// wantErr fails t unless err is non-nil and its message contains every part.
func wantErr(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %q does not mention %q", what, err, p)
		}
	}
}

func TestBadCallsReturnErrors(t *testing.T) {
	_, err := New(16, "Bogus42,Flat", IP)
	wantErr(t, "unknown factory", err, "Bogus42,Flat")
	_, err = New(0, "Flat", IP)
	wantErr(t, "dimension 0", err, "dimension 0")
	_, err = New(16, "Flat", Metric(7))
	wantErr(t, "metric 7", err, "metric")

	x := mustBuild(t, 16, "Flat", L2, randomVectors(10, 16, 1))
	wantErr(t, "add 17 floats", x.Add(make([]float32, 17)), "dimension mismatch", "17", "16")
	d, l := make([]float32, 10), make([]int64, 10)
	wantErr(t, "search 20 floats", x.Search(make([]float32, 20), 5, d, l), "dimension mismatch")
	wantErr(t, "k=0", x.Search(make([]float32, 16), 0, d, l), "k=0")
	wantErr(t, "short buffers", x.Search(make([]float32, 32), 6, d, l), "need 12")
	x.Close()
	wantErr(t, "search after close", x.Search(make([]float32, 16), 5, d, l), "closed")
	wantErr(t, "add after close", x.Add(make([]float32, 16)), "closed")
	wantErr(t, "write after close", x.WriteFile(filepath.Join(t.TempDir(), "x")), "closed")
	x.Close() // twice is fine

	ivf, err := New(16, "IVF64,Flat", L2)
	if err != nil {
		t.Fatal(err)
	}
	defer ivf.Close()
	wantErr(t, "add before train", ivf.Add(randomVectors(4, 16, 2)), "add 4 vectors on IVF64,Flat")
	wantErr(t, "train on too few points", ivf.Train(randomVectors(10, 16, 2)), "train 10 vectors")
}

// indexBytes writes a small index of the given factory and returns its file bytes.
func indexBytes(t testing.TB, factory string, m Metric) []byte {
	t.Helper()
	x := mustBuild(t, 8, factory, m, randomVectors(300, 8, 9))
	path := filepath.Join(t.TempDir(), "seed.faiss")
	if err := x.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// smallFactories are the index kinds used as corruption and fuzz seeds.
var smallFactories = []string{"Flat", "IVF4,Flat", "HNSW8", "SQ8", "IVF4,PQ2x4", "IVF4,SQ8", "OPQ2_4,IVF4,PQ2x4np", "PCA4,Flat"}

func writeTemp(t testing.TB, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bad.faiss")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTruncatedFilesAreRejected(t *testing.T) {
	for _, factory := range smallFactories {
		whole := indexBytes(t, factory, IP)
		for cut := 0; cut < len(whole); cut += 1 + cut/16 {
			path := writeTemp(t, whole[:cut])
			_, err := Read(path, false)
			wantErr(t, factory+" truncated", err, path)
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("%s cut at %d: %v is not a FormatError", factory, cut, err)
			}
			// FAISS's own reader must also fail cleanly (the c_api catches its exceptions).
			if x, err := readUnchecked(path, false); err == nil {
				x.Close()
				t.Errorf("%s cut at %d: FAISS read a truncated file", factory, cut)
			}
		}
	}
}

func TestCorruptFilesAreRejected(t *testing.T) {
	flat := indexBytes(t, "Flat", IP)
	hnsw := indexBytes(t, "HNSW8", IP)
	ivf := indexBytes(t, "IVF4,Flat", IP)
	patch := func(b []byte, off int, v uint64, n int) []byte {
		c := bytes.Clone(b)
		binary.LittleEndian.PutUint64(c[off:], v)
		copy(c[off+n:], b[off+n:])
		return c[:len(b)]
	}
	// Offsets: tag 0-3, d 4-7, ntotal 8-15, 2 unused 16-31, is_trained 32, metric 33-36, data.
	cases := []struct {
		name  string
		data  []byte
		parts []string
	}{
		{"wrong magic", append([]byte("NOPE"), flat[4:]...), []string{`unsupported index type "NOPE"`}},
		{"text file", []byte("this is not an index\n"), []string{"unsupported index type"}},
		{"empty file", nil, []string{"truncated"}},
		{"zero dimension", patch(flat, 4, 0, 4), []string{"dimension 0"}},
		{"ntotal too big", patch(flat, 8, 301, 8), []string{"ntotal 301"}},
		{"huge vector length", patch(flat, 37, 1<<39, 8), []string{"claims 549755813888 elements"}},
		{"metric L1", patch(flat, 33, 2, 4), []string{"unsupported metric type 2"}},
		{"trailing bytes", append(bytes.Clone(flat), 0), []string{"1 unexpected bytes"}},
		{"HNSW neighbor out of range", corruptLastNeighbor(t, hnsw), []string{"outside -1..299"}},
		{"IVF list size", corruptFirstListSize(t, ivf), []string{"inverted list"}},
		{"short transform matrix", shortTransform(t, indexBytes(t, "OPQ2_4,IVF4,PQ2x4np", IP)), []string{"transform matrix holds 31 floats, want 4 x 8"}},
		{"normalizing transform", indexBytes(t, "L2norm,Flat", IP), []string{`unsupported vector transform "VNrm"`}},
	}
	for _, c := range cases {
		path := writeTemp(t, c.data)
		_, err := Read(path, false)
		wantErr(t, c.name, err, append(c.parts, path)...)
	}
	unsupported := mustBuild(t, 8, "RR8,Flat", L2, randomVectors(100, 8, 1))
	unsupported.Close()
	_, err := Read(filepath.Join(t.TempDir(), "missing.faiss"), false)
	wantErr(t, "missing file", err, "missing.faiss", "no such file")
}

// corruptLastNeighbor sets the last neighbor slot of an HNSW file (just before the five
// int32 parameters and the storage index) to an id past ntotal.
func corruptLastNeighbor(t *testing.T, hnsw []byte) []byte {
	t.Helper()
	storage := bytes.LastIndex(hnsw, []byte("IxFI"))
	if storage < 0 {
		t.Fatal("no storage index in HNSW file")
	}
	c := bytes.Clone(hnsw)
	binary.LittleEndian.PutUint32(c[storage-24:], 300)
	return c
}

// shortTransform makes the first transform matrix of an IndexPreTransform file (the 8 x 4
// floats after "LTra", has_bias and the vector length) one float shorter, as FAISS would read
// it without complaint.
func shortTransform(t *testing.T, ixpt []byte) []byte {
	t.Helper()
	lt := bytes.Index(ixpt, []byte("LTra"))
	if lt < 0 {
		t.Fatal("no linear transform in the file")
	}
	at := lt + 4 + 1 // the matrix's length
	if n := binary.LittleEndian.Uint64(ixpt[at:]); n != 32 {
		t.Fatalf("matrix of %d floats, want 32", n)
	}
	c := bytes.Clone(ixpt)
	binary.LittleEndian.PutUint64(c[at:], 31)
	return append(c[:at+8+31*4], ixpt[at+8+32*4:]...)
}

// corruptFirstListSize sets the first list size of an IVF file's "full" size table to 2^40.
func corruptFirstListSize(t *testing.T, ivf []byte) []byte {
	t.Helper()
	full := bytes.Index(ivf, []byte("full"))
	if full < 0 {
		t.Fatal("no list size table in IVF file")
	}
	c := bytes.Clone(ivf)
	binary.LittleEndian.PutUint64(c[full+12:], 1<<40) // after "full" and the vector length
	return c
}

func TestWriteFailureLeavesNoFile(t *testing.T) {
	x := mustBuild(t, 8, "Flat", IP, randomVectors(10, 8, 1))
	dir := t.TempDir()
	wantErr(t, "missing folder", x.WriteFile(filepath.Join(dir, "no", "such", "x.faiss")), "no/such")

	// A directory at the final name: the rename fails, and nothing else is left behind.
	target := filepath.Join(dir, "taken")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "directory at final name", x.WriteFile(target), target)

	// A closed index fails mid-write: the previous file at the final name is untouched.
	old := filepath.Join(dir, "old.faiss")
	if err := x.WriteFile(old); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(old)
	x2 := mustBuild(t, 8, "Flat", IP, randomVectors(20, 8, 2))
	x2.Close()
	wantErr(t, "closed index", x2.WriteFile(old), "closed")
	after, _ := os.ReadFile(old)
	if !bytes.Equal(before, after) {
		t.Error("failed write changed the existing file")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("folder holds %v, want only taken and old.faiss", names)
	}
}

// TestCorruptWordsNeverCrash overwrites each 4-byte word of every seed file's structure
// (headers and size fields, not the bulk vector data) with extreme values: Read must fail
// cleanly or give an index that searches without crashing.
func TestCorruptWordsNeverCrash(t *testing.T) {
	query := randomVectors(2, 8, 78)
	d, l := make([]float32, 6), make([]int64, 6)
	path := filepath.Join(t.TempDir(), "word.faiss")
	for _, factory := range smallFactories {
		whole := indexBytes(t, factory, L2)
		loaded := 0
		for off := 0; off+4 <= len(whole); off += 4 {
			if off >= 512 && off < len(whole)-512 && off%256 != 0 {
				continue // bulk data: sample one word in 64
			}
			for _, v := range []uint32{0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 1 << 20, 0} {
				c := bytes.Clone(whole)
				binary.LittleEndian.PutUint32(c[off:], v)
				if err := os.WriteFile(path, c, 0o644); err != nil {
					t.Fatal(err)
				}
				x, err := Read(path, false)
				if err != nil {
					continue
				}
				loaded++
				if x.Dim() == 8 {
					x.Search(query, 3, d, l) // an error is fine; a crash is not
				}
				x.Close()
			}
		}
		t.Logf("%s: %d bytes, %d corrupted variants loaded", factory, len(whole), loaded)
	}
}

// TestWriteFailsOnFullDisk makes FAISS's own fwrite fail: a child process (this test binary)
// runs with a 64 KiB file size limit (Go ignores SIGXFSZ, so write returns EFBIG) and writes
// a 320 KB index over an existing one.
func TestWriteFailsOnFullDisk(t *testing.T) {
	if dir := os.Getenv("FAISSGO_LIMITED_WRITE_DIR"); dir != "" {
		limitedWrite(dir)
		return
	}
	dir := t.TempDir()
	old := filepath.Join(dir, "x.faiss")
	if err := os.WriteFile(old, []byte("previous index"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriteFailsOnFullDisk$")
	cmd.Env = append(os.Environ(), "FAISSGO_LIMITED_WRITE_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "WRITE ERROR: faissgo: write index "+old) {
		t.Errorf("child did not report the failed write:\n%s", out)
	}
	if b, _ := os.ReadFile(old); string(b) != "previous index" {
		t.Errorf("existing file changed to %d bytes", len(b))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("folder holds %d entries, want only x.faiss (temporary file left?)", len(entries))
	}
}

// limitedWrite is the child side of TestWriteFailsOnFullDisk.
func limitedWrite(dir string) {
	lim := syscall.Rlimit{Cur: 64 << 10, Max: 64 << 10}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Println("setrlimit:", err)
		return
	}
	x, err := New(32, "Flat", L2)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := x.Add(randomVectors(2500, 32, 1)); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("WRITE ERROR:", x.WriteFile(filepath.Join(dir, "x.faiss")))
}

func FuzzRead(f *testing.F) {
	for _, factory := range smallFactories {
		f.Add(indexBytes(f, factory, L2))
	}
	query := randomVectors(2, 8, 77)
	f.Fuzz(func(t *testing.T, data []byte) {
		path := writeTemp(t, data)
		// A file StatFlat accepts is one Stat accepts, with its vectors exactly at the end.
		if v, err := StatFlat(path); err == nil {
			info, err := Stat(path)
			if err != nil || info != v.FileInfo || v.Offset+4*v.Ntotal*int64(v.Dim) != int64(len(data)) {
				t.Fatalf("StatFlat %+v, Stat %+v, %v, file of %d bytes", v, info, err, len(data))
			}
		} else if !strings.Contains(err.Error(), path) {
			t.Fatalf("StatFlat error does not name the file: %v", err)
		}
		x, err := Read(path, false)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		defer x.Close()
		// Whatever passed the format check must be searchable without crashing.
		if x.Dim() == 8 {
			d, l := make([]float32, 6), make([]int64, 6)
			if err := x.Search(query, 3, d, l); err != nil {
				t.Logf("search: %v", err)
			}
		}
	})
}
