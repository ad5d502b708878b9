// Package doclinks holds the test that keeps the README and docs/ navigable: every relative
// link resolves to a file (and a heading, for #anchors), every page under docs/ is linked from
// somewhere, and the README stays a page a newcomer reads in minutes.
package doclinks

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const root = "../.."

// link matches a Markdown link's target: [text](target), the target without spaces.
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// pages returns README.md and every .md file under docs/, relative to root.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(root, path)
			out = append(out, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// slug is GitHub's anchor for a heading: lower case, spaces to '-', punctuation other than
// '-' and '_' dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the slugs of a Markdown file's headings (outside code blocks).
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if !fenced && strings.HasPrefix(line, "#") {
			out[slug(strings.TrimLeft(line, "#"))] = true
		}
	}
	return out
}

func TestLinksResolve(t *testing.T) {
	all := pages(t)
	linked := map[string]bool{"README.md": true}
	checked := 0
	for _, page := range all {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.Clean(filepath.Join(filepath.Dir(page), file))
			}
			checked++
			info, err := os.Stat(filepath.Join(root, dest))
			if err != nil {
				t.Errorf("%s: link %q: %v", page, target, err)
				continue
			}
			linked[dest] = true
			if anchor == "" {
				continue
			}
			if info.IsDir() || !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s: link %q: an anchor into something that is not a Markdown file", page, target)
				continue
			}
			destText, _ := os.ReadFile(filepath.Join(root, dest))
			if !anchors(string(destText))[anchor] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", page, target, dest, anchor)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d relative links found in %d pages: is the pattern broken?", checked, len(all))
	}
	for _, page := range all {
		if !linked[page] {
			t.Errorf("%s is linked from no page", page)
		}
	}
}

// The README stays short, a page a newcomer reads in minutes: what needle is, the two
// commands, examples, layout, links.
func TestReadmeIsShort(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(text), "\n"); n >= 250 {
		t.Errorf("README.md has %d lines: move reference material to docs/ (at most 250)", n)
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		" What has never run on a GPU":                     "what-has-never-run-on-a-gpu",
		" The GPU check (ready, never run)":                "the-gpu-check-ready-never-run",
		" GPU encoder: `--gpu` on encode, build, serve; x": "gpu-encoder---gpu-on-encode-build-serve-x",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}
