// Package layout holds the test that keeps the repository's floors true (docs/layout.md):
// every import goes down or sideways, never up, and only tests (and the benchmarks' own
// harness) use the test kit.
package layout

import (
	"os/exec"
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
	// weight transfer: the parts (wire: the protocol and the delta codec; store; server), then
	// the nodes that compose them (sender, receiver) and the entry that runs them (weights: the
	// daemons, /metrics, the delta file of `needle delta`)
	{"needle/weights/wire", 3}, {"needle/weights/store", 3}, {"needle/weights/server", 3},
	{"needle/weights/sender", 4}, {"needle/weights/receiver", 4}, {"needle/weights", 4},
	{"needle/indexbuild", 4},                      // the offline build job: corpus -> encoder -> index folder
	{"needle/engine", 4},                          // serving: Open composes the parts; the Retriever, the Batcher, the cache
	{"needle/server", 5}, {"needle/server/ui", 5}, // the page the server embeds: beside it
	{"needle/server/lifecycle", 6},
	{"needle/testkit/", 7},                        // test helpers: imported by tests (and bench's harness) only
	{"needle/bench", 8}, {"needle/bench/plot", 8}, // every bench target draws through it
	{"needle/tools/doctor", 9}, // reads every floor below (platform, cuda, engine) and changes nothing
	{"needle/tools/", 9}, {"needle/cmd/", 9}, {"needle/e2e", 9}, {"needle/examples", 9},
	{"needle/python", 9},
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
