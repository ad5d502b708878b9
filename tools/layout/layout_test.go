// Package layout holds the test that keeps the repository's floors true (docs/layout.md):
// every import goes down or sideways, never up, and only tests use the test kit (the shipped
// binary links none of it: shipped_test.go). Imports are Go's (of code and of tests) and the C,
// C++ and CUDA sources' #include "...".
package layout

import (
	"bufio"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// floors, lowest first: a package's floor is that of the longest prefix naming it.
var floors = []struct {
	prefix string
	floor  int
}{
	{"needle/platform/", 0}, {"needle/internal/", 0},
	{"needle/cuda", 1}, {"needle/safetensors", 1}, {"needle/faissgo", 1},
	{"needle/kernels/", 2},
	// the parts: encoders, index backends and the index folder's format, the corpus store
	{"needle/encoder/", 3}, {"needle/index/", 3}, {"needle/docstore", 3},
	// weight transfer: the parts (wire: the protocol and the delta codec; store; feed; deltafile:
	// a step at rest, `needle delta`), then the nodes that compose them (sender, receiver) and
	// the entry that runs them (weights: the daemons, /metrics)
	{"needle/weights/wire", 3}, {"needle/weights/store", 3}, {"needle/weights/feed", 3}, {"needle/weights/deltafile", 3},
	{"needle/weights/sender", 4}, {"needle/weights/receiver", 4}, {"needle/weights", 4},
	{"needle/indexbuild", 4},                      // the offline build job: corpus -> encoder -> index folder
	{"needle/doctor", 4},                          // `needle doctor`: reads the floors below (platform, cuda, engine), changes nothing
	{"needle/engine", 4},                          // serving: Open composes the parts; the Retriever, the Batcher, the cache
	{"needle/server", 5}, {"needle/server/ui", 5}, // the page the server embeds: beside it
	{"needle/server/lifecycle", 6}, {"needle/server/front", 6}, // the process; HAProxy before the replicas
	{"needle/testkit/", 7},                        // test helpers: imported by tests only
	{"needle/bench", 8}, {"needle/bench/plot", 8}, // every bench target draws through it
	{"needle/tools/", 9}, {"needle/cmd/", 9}, {"needle/e2e", 9}, {"needle/examples", 9},
	{"needle/python", 9},
	{"needle/capi", 9}, // libneedle.so: the trainer's entry, as cmd/ is the binary's

}

// packages lists needle's Go packages, as paths from the repository root ("" for the root).
func packages(t *testing.T) []string {
	out, err := exec.Command("go", "list", "needle/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		pkgs = append(pkgs, strings.TrimPrefix(strings.TrimPrefix(p, "needle"), "/"))
	}
	return pkgs
}

// unlisted returns the packages that the code block of a layout page (docs/layout.md) does
// not name. An entry is a line whose first field is a folder ("kernels/bert/nn/"), with the
// indented lines below it; it names that folder's package, and the packages of its
// subfolders that begin one of its items ("internal/  atomicfile (...), npy, ...": items
// start the text or follow a comma, a semicolon or an opening parenthesis).
func unlisted(page string, pkgs []string) []string {
	entries := map[string]string{} // folder -> its entry's text
	folder, inBlock := "", false
	for _, line := range strings.Split(page, "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			inBlock, folder = !inBlock, ""
		case !inBlock || strings.TrimSpace(line) == "":
		case line[0] == ' ' && folder != "":
			entries[folder] += " " + line
		default:
			first := strings.Fields(line)[0]
			folder = strings.TrimSuffix(first, "/")
			entries[folder] += " " + strings.TrimPrefix(line, first)
		}
	}
	var missing []string
	for _, p := range pkgs {
		if _, ok := entries[p]; ok {
			continue
		}
		i := strings.LastIndex(p, "/")
		if i >= 0 && slices.Contains(itemNames(entries[p[:i]]), p[i+1:]) {
			continue
		}
		missing = append(missing, p)
	}
	return missing
}

// itemNames are the first words of an entry's items ("wordnet/ (corpus)" -> "wordnet").
func itemNames(text string) []string {
	var names []string
	for _, item := range strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == ';' || r == '(' }) {
		item = strings.TrimLeft(item, " `")
		end := strings.IndexFunc(item, func(r rune) bool {
			return !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		})
		if end < 0 {
			end = len(item)
		}
		names = append(names, item[:end])
	}
	return names
}

// TestEveryPackageIsListed: docs/layout.md names every package, so the page is the whole map.
func TestEveryPackageIsListed(t *testing.T) {
	page, err := os.ReadFile("../../docs/layout.md")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := packages(t)
	if len(pkgs) < 50 {
		t.Fatalf("go list found only %d packages: %v", len(pkgs), pkgs)
	}
	for _, p := range unlisted(string(page), pkgs) {
		t.Errorf("%s is not in docs/layout.md: add a line for it (folder, what it is)", p)
	}
}

// TestUnlisted: the check finds a package that the page leaves out (or names outside the code
// block, or only as a word inside an item), and accepts one named by its own line, or as an
// item of its parent's line or of a continuation of that line.
func TestUnlisted(t *testing.T) {
	page := "intro internal/gone\n```\nengine/   the engine\ninternal/ lru (cache), the text writer;\n          npy\ntools/    wordnet/ (corpus)\n```\nkernels/bert/nn/ after the block\n"
	pkgs := []string{"engine", "internal/lru", "internal/npy", "tools/wordnet", "tools", "internal/gone", "internal/writer", "kernels/bert/nn", "engine/sub"}
	if got, want := unlisted(page, pkgs), []string{"internal/gone", "internal/writer", "kernels/bert/nn", "engine/sub"}; !slices.Equal(got, want) {
		t.Errorf("unlisted: %v, want %v", got, want)
	}
}

func floorOf(pkg string) (int, bool) {
	best, floor := -1, 0
	for _, f := range floors {
		if (pkg == strings.TrimSuffix(f.prefix, "/") || strings.HasPrefix(pkg, f.prefix)) && len(f.prefix) > best {
			best, floor = len(f.prefix), f.floor
		}
	}
	return floor, best >= 0
}

// up reports whether an import from (a package or a source file's folder) of imp goes up the
// floors: imp is of a higher floor, but for the test kit, which tests of any floor use.
func up(from, imp string, test bool) bool {
	f, ok := floorOf(from)
	to, known := floorOf(imp)
	return ok && known && to > f && !(test && strings.HasPrefix(imp, "needle/testkit/"))
}

// TestImportsGoDown: no package imports one of a higher floor, in its code or its tests; the
// non-test code of the floors below the test kit does not import it.
func TestImportsGoDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-f",
		`{{.ImportPath}}{{range .Imports}} {{.}}{{end}} |{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}`,
		"needle/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		code, tests, _ := strings.Cut(line, "|")
		fields := strings.Fields(code)
		pkg := fields[0]
		if _, ok := floorOf(pkg); !ok {
			t.Errorf("%s has no floor: add it to floors (and to docs/layout.md)", pkg)
			continue
		}
		for i, imps := range [][]string{fields[1:], strings.Fields(tests)} {
			for _, imp := range imps {
				if !strings.HasPrefix(imp, "needle/") || imp == pkg {
					continue
				}
				checked++
				if up(pkg, imp, i == 1) {
					t.Errorf("%s%s imports %s: an import up", pkg, []string{"", "'s tests"}[i], imp)
				}
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d imports between needle's packages checked: go list printed\n%s", checked, out)
	}
}

// includeRe matches a C, C++ or CUDA include of a file of the repository (a cgo preamble's too).
var includeRe = regexp.MustCompile(`^\s*#\s*include\s+"([^"]+)"`)

// includes lists the #include "..." of the repository's sources as [file, included file], both
// from the repository root. An include resolves beside its file first, then from the root (the
// -I of every native build); one that resolves to neither is a system or third-party header.
func includes(t *testing.T, root string) [][2]string {
	var pairs [][2]string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || slices.Contains([]string{"build", "dist", "gpucheck", "bin"}, rel)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !slices.Contains([]string{".c", ".h", ".cu", ".cpp", ".cc", ".go"}, filepath.Ext(p)) {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			m := includeRe.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			for _, cand := range []string{path.Join(path.Dir(filepath.ToSlash(rel)), m[1]), path.Clean(m[1])} {
				if _, err := os.Stat(filepath.Join(root, cand)); err == nil && !strings.HasPrefix(cand, "../") {
					pairs = append(pairs, [2]string{filepath.ToSlash(rel), cand})
					break
				}
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return pairs
}

// testSource: a C, C++ or CUDA file that only tests compile (a test/ or emutest/ folder, a
// _test file) may include the test kit, as Go tests import it.
func testSource(file string) bool {
	dirs := strings.Split(path.Dir(file), "/")
	return slices.Contains(dirs, "test") || slices.Contains(dirs, "emutest") ||
		strings.Contains(path.Base(file), "_test.")
}

// TestIncludesGoDown: the floors hold for the native sources too: no file includes one of a
// higher floor's folder, and only test sources include the test kit's.
func TestIncludesGoDown(t *testing.T) {
	pairs := includes(t, "../..")
	across := 0
	for _, p := range pairs {
		from, to := "needle/"+path.Dir(p[0]), "needle/"+path.Dir(p[1])
		if _, ok := floorOf(from); !ok {
			t.Errorf("%s has no floor: add its folder to floors (and to docs/layout.md)", p[0])
			continue
		}
		if from != to {
			across++
		}
		if up(from, to, testSource(p[0])) {
			t.Errorf("%s includes %s: an include up", p[0], p[1])
		}
	}
	if across < 30 {
		t.Fatalf("only %d includes across folders found: %v", across, pairs)
	}
}

// TestUp: the rule itself, on a header of a kernel, the test kit from a test and from code.
func TestUp(t *testing.T) {
	for _, c := range []struct {
		from, imp string
		test      bool
		bad       bool
	}{
		{"needle/kernels/trainer/logprob", "needle/platform/cpu", false, false},
		{"needle/platform/cpu", "needle/kernels/common", false, true},
		{"needle/kernels/bert/nngpu", "needle/testkit/cudaemu", false, true},
		{"needle/kernels/bert/nngpu/emutest", "needle/testkit/cudaemu", true, false},
		{"needle/docstore", "needle/bench/synth", true, true},
		{"needle/testkit/cudaemu", "needle/kernels/trainer/delta", false, false},
	} {
		if got := up(c.from, c.imp, c.test); got != c.bad {
			t.Errorf("up(%s, %s, test %v): %v, want %v", c.from, c.imp, c.test, got, c.bad)
		}
	}
	if !testSource("kernels/trainer/delta/emutest/delta_emu_test.cpp") || testSource("kernels/trainer/delta/delta.cu") {
		t.Error("testSource: an emulation test is a test source, a kernel is not")
	}
}
