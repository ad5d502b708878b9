package docstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"needle/testkit/testenv"
)

const wikiPrefix = "https://en.wikipedia.org/w/index.php?title="

// pagesFixture has what the anchor's dict sees: plain and escaped urls, a duplicate (the
// later row wins), a stored url with "index.php/" (unreachable), and bad lines the anchor
// would crash on (ours skips them and counts them).
var pagesFixture = strings.Join([]string{
	`{"url": "` + wikiPrefix + `Beveridge,%20Victoria", "contents": "Beveridge is a town"}`,
	`{"contents": "old", "url": "` + wikiPrefix + `Dup"}`,
	`{"url": "https://en.wikipedia.org/wiki/Caf\u00e9", "contents": "escaped \u00e9 in url"}`,
	`{"url": "` + wikiPrefix + `Dup", "contents": "new", "extra": [1, {"url": "nested is ignored"}]}`,
	`{"url": "https://en.wikipedia.org/w/index.php/Slash", "contents": "stored with index.php/"}`,
	``,
	`{"contents": "no url"}`,
	`{"url": 42, "contents": "number url"}`,
	`not json`,
	`{"url": "https://en.wikipedia.org/wiki/Zo\u00eb", "contents": "raw UTF-8 ` + "\u00eb" + `"}`,
}, "\n") + "\r\n"

func openPages(t testing.TB, path string) *Pages {
	t.Helper()
	p, err := OpenPages(path, Options{})
	if err != nil {
		t.Fatalf("OpenPages(%s): %v", path, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestPagesLookup(t *testing.T) {
	path := writeFile(t, t.TempDir(), "pages.jsonl", pagesFixture)
	for reopen := range 2 { // build, then the same from the sidecars
		p := openPages(t, path)
		if p.Len() != 10 || p.BadRows() != 4 {
			t.Fatalf("reopen %d: Len %d BadRows %d, want 10 and 4", reopen, p.Len(), p.BadRows())
		}
		for _, tc := range []struct{ url, contents string }{
			{wikiPrefix + "Beveridge,%20Victoria", "Beveridge is a town"},
			{"https://en.wikipedia.org/w/index.php/Beveridge,%20Victoria", "Beveridge is a town"},
			{wikiPrefix + "Dup", "new"},
			{"https://en.wikipedia.org/wiki/Café", "escaped é in url"},
			{"https://en.wikipedia.org/wiki/Zoë", "raw UTF-8 ë"},
			{"https://en.wikipedia.org/w/index.php/Slash", ""},
			{"nested is ignored", ""},
			{wikiPrefix + "Beveridge,%20Victoria ", ""},
			{"", ""},
		} {
			row, ok := p.Lookup(tc.url)
			var got struct{ Contents string }
			if ok {
				if err := json.Unmarshal(row, &got); err != nil {
					t.Errorf("Lookup(%q) row %q: %v", tc.url, row, err)
				}
			}
			if ok != (tc.contents != "") || got.Contents != tc.contents {
				t.Errorf("Lookup(%q) = %q, %v; want contents %q", tc.url, row, ok, tc.contents)
			}
		}
		bad, err := p.Validate(nil)
		if err != nil || len(bad) != 4 || bad[0].Line != 6 || bad[3].Line != 9 {
			t.Errorf("Validate = %v, %v; want lines 6..9", bad, err)
		}
		p.Close()
	}
	if _, err := os.Stat(path + urlsExt); err != nil {
		t.Errorf("url index sidecar not next to the pages file: %v", err)
	}
}

func TestNormalizeURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://en.wikipedia.org/w/index.php/A_B":       wikiPrefix + "A_B",
		wikiPrefix + "A_B":                               wikiPrefix + "A_B",
		"https://en.wikipedia.org/wiki/A_B":              "https://en.wikipedia.org/wiki/A_B",
		"x/index.php/a/index.php/b":                      "x/index.php?title=a/index.php?title=b",
		"https://en.wikipedia.org/w/Index.php/Case":      "https://en.wikipedia.org/w/Index.php/Case",
		"https://en.wikipedia.org/w/index.php?title=a/b": "https://en.wikipedia.org/w/index.php?title=a/b",
	} {
		if got := NormalizeURL(in); got != want {
			t.Errorf("NormalizeURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	p := openPages(t, writeFile(t, t.TempDir(), "pages.jsonl", pagesFixture))
	allocs := testing.AllocsPerRun(1000, func() {
		if _, ok := p.Lookup(wikiPrefix + "Dup"); !ok {
			t.Fatal("miss")
		}
		p.Lookup("https://example.org/miss")
	})
	if allocs != 0 {
		t.Errorf("Lookup allocates %.1f times per call, want 0", allocs)
	}
}

// anchorAccess is the page lookup of ASearcher tools/local_retrieval_server.py (PageAccess),
// restated: a dict from json.loads of every line keyed by the raw url, and the request url
// rewritten with str.replace. It prints, per request url, the page or null.
const anchorAccess = `
import json, sys
pages = {}
for line in open(sys.argv[1], "r"):
    page = json.loads(line)
    pages[page["url"]] = page
out = []
for url in json.load(open(sys.argv[2])):
    if "index.php/" in url:
        url = url.replace("index.php/", "index.php?title=")
    out.append(pages.get(url))
json.dump(out, sys.stdout)
`

// TestPagesMatchAnchor runs the anchor's own lookup logic in Python on the same file and
// compares every answer. The file has only lines the anchor can load (it crashes on others).
func TestPagesMatchAnchor(t *testing.T) {
	py := testenv.Python(t)
	dir := t.TempDir()
	var good []string
	for _, l := range strings.Split(strings.TrimSpace(pagesFixture), "\n") {
		if strings.Contains(l, `"url": "`) {
			good = append(good, l)
		}
	}
	path := writeFile(t, dir, "pages.jsonl", strings.Join(good, "\n")+"\n")
	requests := []string{
		wikiPrefix + "Beveridge,%20Victoria", "https://en.wikipedia.org/w/index.php/Beveridge,%20Victoria",
		wikiPrefix + "Dup", "https://en.wikipedia.org/w/index.php/Dup", "https://en.wikipedia.org/wiki/Café",
		"https://en.wikipedia.org/wiki/Zoë", "https://en.wikipedia.org/w/index.php/Slash", "missing", "",
	}
	reqFile := filepath.Join(dir, "requests.json")
	reqJSON, _ := json.Marshal(requests)
	os.WriteFile(reqFile, reqJSON, 0o644)
	out, err := exec.Command(py, "-c", anchorAccess, path, reqFile).Output()
	if err != nil {
		t.Fatalf("anchor script: %v", err)
	}
	var anchor []json.RawMessage
	if err := json.Unmarshal(out, &anchor); err != nil || len(anchor) != len(requests) {
		t.Fatalf("anchor output %q: %v", out, err)
	}
	p := openPages(t, path)
	for i, url := range requests {
		row, ok := p.Lookup(url)
		if !ok {
			row = []byte("null")
		}
		if !sameJSON(t, row, anchor[i]) {
			t.Errorf("Lookup(%q) = %s; anchor gives %s", url, row, anchor[i])
		}
	}
}

// sameJSON compares two JSON texts as values.
func sameJSON(t *testing.T, a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		t.Fatalf("not JSON: %q or %q", a, b)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

// TestPagesDamagedIndex: a url index whose header is right but whose table is garbage
// (every slot used, nothing matching) gives misses, not a hang or a crash.
func TestPagesDamagedIndex(t *testing.T) {
	path := writeFile(t, t.TempDir(), "pages.jsonl", pagesFixture)
	openPages(t, path).Close()
	side, err := os.ReadFile(path + urlsExt)
	if err != nil {
		t.Fatal(err)
	}
	for i := headerSize; i < len(side); i++ {
		side[i] = 0xff
	}
	writeFile(t, filepath.Dir(path), filepath.Base(path)+urlsExt, string(side))
	p := openPages(t, path)
	if row, ok := p.Lookup(wikiPrefix + "Dup"); ok {
		t.Errorf("damaged index found %q", row)
	}
}

// TestPagesDuplicatesAcrossChunks: rows are checked in parallel chunks and inserted in
// any chunk order; the last row of each url must still win.
func TestPagesDuplicatesAcrossChunks(t *testing.T) {
	const rows, urls = 3*scanChunkRows + 5, 1000
	var sb strings.Builder
	for i := range rows {
		fmt.Fprintf(&sb, `{"url":"u%d","contents":"%d"}`+"\n", i%urls, i)
	}
	p := openPages(t, writeFile(t, t.TempDir(), "pages.jsonl", sb.String()))
	for u := range urls {
		last := (rows-1-u)/urls*urls + u
		row, ok := p.Lookup(fmt.Sprintf("u%d", u))
		if want := fmt.Sprintf(`{"url":"u%d","contents":"%d"}`, u, last); !ok || string(row) != want {
			t.Fatalf("Lookup(u%d) = %s, %v; want %s", u, row, ok, want)
		}
	}
}
