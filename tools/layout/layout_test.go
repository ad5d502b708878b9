// Package layout holds the test that keeps the repository's floors true (docs/layout.md):
// every import goes down or sideways, never up, and only tests use the test kit (the shipped
// binary links none of it: shipped_test.go).
package layout

import (
	"os"
	"os/exec"
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

// TestImportsGoDown: no package imports one of a higher floor; the non-test code of the
// floors below the test kit does not import it.
func TestImportsGoDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "needle/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := fields[0]
		from, ok := floorOf(pkg)
		if !ok {
			t.Errorf("%s has no floor: add it to floors (and to docs/layout.md)", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, "needle/") {
				continue
			}
			to, ok := floorOf(imp)
			if !ok {
				continue // reported as a package of its own
			}
			checked++
			if to > from {
				t.Errorf("%s (floor %d) imports %s (floor %d): an import up", pkg, from, imp, to)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d imports between needle's packages checked: go list printed\n%s", checked, out)
	}
}
