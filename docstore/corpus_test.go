package docstore

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func openCorpus(t testing.TB, path string, opt Options) *Corpus {
	t.Helper()
	c, err := OpenCorpus(path, opt)
	if err != nil {
		t.Fatalf("OpenCorpus(%s): %v", path, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestCorpusRows(t *testing.T) {
	const corpus = `{"id": "7", "contents": "\"A\"\nfirst", "url": "u0"}` + "\n" +
		`{"contents":"second","id":"0"}` + "\r\n" +
		"\n" +
		`{"id": "3"}` + "\n" +
		`{"contents": 5}` + "\n" +
		`[1, 2]` + "\n" +
		`{"contents": "x"` + "\n" +
		"{\"contents\": \"bad \xff utf8\"}\n" +
		`{"contents": "dup", "contents": null}` + "\n" +
		`{"contents": null, "contents": "last wins"}`
	tests := []struct {
		row    int64
		want   string // the row, or the BadRowError reason
		bad    bool
		decode string
	}{
		{0, `{"id": "7", "contents": "\"A\"\nfirst", "url": "u0"}`, false, "\"A\"\nfirst"},
		{1, `{"contents":"second","id":"0"}`, false, "second"},
		{2, reasonEmpty, true, ""},
		{3, `no "contents" field`, true, ""},
		{4, `"contents" is not a string`, true, ""},
		{5, reasonNotObject, true, ""},
		{6, reasonJSON, true, ""},
		{7, reasonUTF8, true, ""},
		{8, `"contents" is not a string`, true, ""},
		{9, `{"contents": null, "contents": "last wins"}`, false, "last wins"},
	}
	path := writeFile(t, t.TempDir(), "c.jsonl", corpus)
	c := openCorpus(t, path, Options{})
	if c.Len() != int64(len(tests)) {
		t.Fatalf("Len = %d, want %d", c.Len(), len(tests))
	}
	for _, tc := range tests {
		row, err := c.Row(tc.row)
		if tc.bad {
			var bre *BadRowError
			if !errors.As(err, &bre) || bre.Line != tc.row+1 || bre.Reason != tc.want || bre.Path != path {
				t.Errorf("Row(%d) = %q, %v; want BadRowError line %d %q", tc.row, row, err, tc.row+1, tc.want)
			}
			continue
		}
		if err != nil || string(row) != tc.want {
			t.Errorf("Row(%d) = %q, %v; want %q", tc.row, row, err, tc.want)
		}
		if s, err := c.Contents(tc.row); err != nil || s != tc.decode {
			t.Errorf("Contents(%d) = %q, %v; want %q", tc.row, s, err, tc.decode)
		}
	}
	if _, err := c.Row(c.Len()); err == nil {
		t.Errorf("Row(Len()) gave no error")
	}
	if _, err := c.Row(-1); err == nil {
		t.Errorf("Row(-1) gave no error")
	}

	var progressed int64
	bad, err := c.Validate(func(done, total int64) { progressed = done })
	if err != nil {
		t.Fatal(err)
	}
	var lines []int64
	for _, b := range bad {
		lines = append(lines, b.Line)
	}
	if want := []int64{3, 4, 5, 6, 7, 8, 9}; !slices.Equal(lines, want) || progressed != c.Len() {
		t.Errorf("Validate lines = %v (progress %d), want %v (progress %d)", lines, progressed, want, c.Len())
	}
}

func TestCorpusOpenErrors(t *testing.T) {
	dir := t.TempDir()
	empty := writeFile(t, dir, "empty.jsonl", "")
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing.jsonl"), "no such file"},
		{empty, "empty file"},
		{dir, "not a regular file"},
	} {
		_, err := OpenCorpus(tc.path, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("OpenCorpus(%s) error = %v; want it to name the file and say %q", tc.path, err, tc.want)
		}
	}
}

// TestCorpusStaleSidecar changes the corpus in the ways a sidecar could miss: appended rows
// (size), same size rewritten (mtime), and same size rewritten with the old mtime restored
// (only the content hash tells).
func TestCorpusStaleSidecar(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "c.jsonl", `{"contents":"a"}`+"\n"+`{"contents":"b"}`+"\n")
	reopenRow := func(want string, wantLen int64) {
		t.Helper()
		c, err := OpenCorpus(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		last, err := c.Row(c.Len() - 1)
		if c.Len() != wantLen || err != nil || string(last) != want {
			t.Fatalf("after change: Len %d, last row %q, %v; want %d, %q", c.Len(), last, err, wantLen, want)
		}
	}
	reopenRow(`{"contents":"b"}`, 2)
	if _, err := os.Stat(path + offsetsExt); err != nil {
		t.Fatalf("sidecar not next to the corpus: %v", err)
	}

	writeFile(t, dir, "c.jsonl", `{"contents":"a"}`+"\n"+`{"contents":"b"}`+"\n"+`{"contents":"c"}`)
	reopenRow(`{"contents":"c"}`, 3)

	st, _ := os.Stat(path)
	writeFile(t, dir, "c.jsonl", `{"contents":"a"}`+"\n"+`{"contents":"b"}`+"\n"+`{"contents":"d"}`)
	if err := os.Chtimes(path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	reopenRow(`{"contents":"d"}`, 3)

	writeFile(t, dir, "c.jsonl", `{"contents":"e"}`)
	reopenRow(`{"contents":"e"}`, 1)
}

func TestCorpusCorruptSidecarIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "c.jsonl", `{"contents":"a"}`+"\n"+`{"contents":"b"}`+"\n")
	openCorpus(t, path, Options{}).Close()
	side := path + offsetsExt
	for _, garbage := range []string{"", "short", strings.Repeat("\xff", 200)} {
		writeFile(t, dir, filepath.Base(side), garbage)
		c := openCorpus(t, path, Options{})
		if row, err := c.Row(1); c.Len() != 2 || err != nil || string(row) != `{"contents":"b"}` {
			t.Errorf("sidecar %q: Len %d, Row(1) = %q, %v", garbage, c.Len(), row, err)
		}
		c.Close()
	}
}

// A sidecar whose header still matches but whose offsets were damaged (a flipped byte, a
// disk error) fails its checksum at open and is rebuilt.
func TestCorpusSidecarWithDamagedOffsetsIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "c.jsonl", `{"contents":"a"}`+"\n"+`{"contents":"b"}`+"\n"+`{"contents":"c"}`+"\n")
	openCorpus(t, path, Options{}).Close()
	side := path + offsetsExt
	good, err := os.ReadFile(side)
	if err != nil {
		t.Fatal(err)
	}
	bad := slices.Clone(good)
	bad[headerSize+8*2] ^= 0x04 // row 2's start offset: 34 becomes 38
	writeFile(t, dir, filepath.Base(side), string(bad))
	c := openCorpus(t, path, Options{})
	if row, err := c.Row(1); err != nil || string(row) != `{"contents":"b"}` {
		t.Errorf("Row(1) = %q, %v after damaging the sidecar", row, err)
	}
	if now, _ := os.ReadFile(side); !slices.Equal(now, good) {
		t.Errorf("the damaged sidecar was not rebuilt")
	}
}

func TestCorpusSidecarLocation(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "c.jsonl", `{"contents":"a"}`)
	explicit := filepath.Join(t.TempDir(), "sidecars")
	c := openCorpus(t, path, Options{SidecarDir: explicit})
	if want := filepath.Join(explicit, "c.jsonl"+offsetsExt); c.SidecarPath() != want {
		t.Errorf("SidecarPath = %s, want %s", c.SidecarPath(), want)
	}
	if _, err := os.Stat(path + offsetsExt); !os.IsNotExist(err) {
		t.Errorf("a sidecar was written next to the corpus although SidecarDir was set")
	}

	cache := t.TempDir()
	t.Setenv("NEEDLE_CACHE", cache)
	makeUnwritable(t, dir)
	c = openCorpus(t, path, Options{})
	if !strings.HasPrefix(c.SidecarPath(), filepath.Join(cache, "docstore")+"/") {
		t.Errorf("SidecarPath = %s, want it under %s/docstore", c.SidecarPath(), cache)
	}
	if row, err := c.Row(0); err != nil || string(row) != `{"contents":"a"}` {
		t.Errorf("Row(0) = %q, %v", row, err)
	}
}

// makeUnwritable makes dir refuse new files: by mode bits, or for root (which ignores
// them) by the immutable attribute.
func makeUnwritable(t *testing.T, dir string) {
	t.Helper()
	writable := func() bool {
		f, err := os.CreateTemp(dir, "probe")
		if err == nil {
			f.Close()
			os.Remove(f.Name())
		}
		return err == nil
	}
	os.Chmod(dir, 0o555)
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	if writable() {
		if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
			t.Skipf("cannot make %s unwritable as this user (chattr: %v %s)", dir, err, out)
		}
		t.Cleanup(func() { exec.Command("chattr", "-i", dir).Run() })
	}
	if writable() {
		t.Skipf("cannot make %s unwritable", dir)
	}
}

// TestCorpusChangedWhileBuilding grows the corpus while the sidecar is being built: the
// build must fail with a clear error or describe the file as it was, never mix the two.
func TestCorpusChangedWhileBuilding(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "c.jsonl", strings.Repeat(`{"contents":"aaaaaaaa"}`+"\n", 1<<18))
	var once sync.Once
	opt := Options{Progress: func(done, total int64) {
		once.Do(func() {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Error(err)
				return
			}
			f.WriteString(`{"contents":"late"}` + "\n")
			f.Close()
			future := time.Now().Add(time.Hour)
			os.Chtimes(path, future, future)
		})
	}}
	_, err := OpenCorpus(path, opt)
	if err == nil || !strings.Contains(err.Error(), "changed while") {
		t.Fatalf("OpenCorpus while the file grows: err = %v, want a 'changed while' error", err)
	}
	if _, err := os.Stat(path + offsetsExt); !os.IsNotExist(err) {
		t.Errorf("a sidecar was left behind for a file that changed during the build")
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, "*.tmp*")); len(leftovers) > 0 {
		t.Errorf("temp files left: %v", leftovers)
	}
	c := openCorpus(t, path, Options{})
	if c.Len() != 1<<18+1 {
		t.Errorf("reopened: Len = %d, want %d", c.Len(), 1<<18+1)
	}
}

func TestCorpusConcurrentRows(t *testing.T) {
	var sb strings.Builder
	for i := range 1000 {
		sb.WriteString(`{"id":"` + strings.Repeat("x", i%7) + `","contents":"row ` + strconv.Itoa(i) + `"}` + "\n")
	}
	c := openCorpus(t, writeFile(t, t.TempDir(), "c.jsonl", sb.String()), Options{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := int64(g); i < c.Len(); i += 3 {
				s, err := c.Contents(i)
				if err != nil || s != "row "+strconv.Itoa(int(i)) {
					t.Errorf("Contents(%d) = %q, %v", i, s, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestRowDoesNotAllocate(t *testing.T) {
	row := `{"id": "1", "contents": "\"T\"\ntext with \\u00e9 escapes and more words", "meta": {"a": [1, 2.5e3, true, null]}}`
	c := openCorpus(t, writeFile(t, t.TempDir(), "c.jsonl", row+"\n"+row+"\n"), Options{})
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := c.Row(1); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Row allocates %.1f times per call, want 0", allocs)
	}
}

// A corpus truncated in place under its mapping: reads past the new end fault (SIGBUS),
// which must become an error naming the change, not a crash; so must every later read.
func TestCorpusTruncatedInPlaceIsAnError(t *testing.T) {
	var sb strings.Builder
	for i := range 20000 { // ~0.6 MB: many pages past the truncation point
		sb.WriteString(`{"id":"` + strconv.Itoa(i) + `","contents":"row text"}` + "\n")
	}
	path := writeFile(t, t.TempDir(), "c.jsonl", sb.String())
	c := openCorpus(t, path, Options{})
	last := c.Len() - 1
	if _, err := c.Row(last); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 100); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, err := c.Row(last)
		if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "now 100 bytes") {
			t.Fatalf("Row after truncation: %v, want ErrChanged naming %s and its new size", err, path)
		}
	}
	if _, err := c.Contents(0); !errors.Is(err, ErrChanged) {
		t.Errorf("Contents after a fault: %v, want ErrChanged", err)
	}
}

func TestCatchFaultPassesOtherPanicsOn(t *testing.T) {
	defer func() {
		if r := recover(); r != "not a fault" {
			t.Errorf("recovered %v, want the original panic", r)
		}
	}()
	_ = CatchFault(func() { panic("not a fault") })
}
