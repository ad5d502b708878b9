package layout

import (
	"os/exec"
	"strings"
	"testing"
)

// TestShippedBinaryLinksNoTestKit: what ships (the needle binary, needle bench included) links
// no test helper and no tool: `go list -deps needle/cmd/needle` names no testkit/ or tools/
// package.
func TestShippedBinaryLinksNoTestKit(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "needle/cmd/needle").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps found only %d packages: %v", len(deps), deps)
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "needle/testkit/") || strings.HasPrefix(p, "needle/tools/") {
			t.Errorf("needle links %s: shipped code lives where docs/layout.md gives it a room, not in testkit/ or tools/", p)
		}
	}
}
