package docscheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// root is the top of the checkout, from this package's directory.
const root = "../.."

// readmeMaxLines keeps README.md a front door (issue 24): what a newcomer
// needs in the first five minutes, with the manual under docs/.
const readmeMaxLines = 300

// pages are the Markdown pages a reader of the repository meets: those at
// the top (README.md, BENCHMARKS.md) and the manual in docs/.
func pages(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, pattern := range []string{"*.md", "docs/*.md"} {
		matches, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range matches {
			rel, err := filepath.Rel(root, m)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, filepath.ToSlash(rel))
		}
	}
	return out
}

// Every relative link of the pages leads to a file, and to a heading when
// it names an anchor.
func TestPageLinks(t *testing.T) {
	list := pages(t)
	if len(list) < 2 {
		t.Fatalf("found only %v: is %s the checkout's top?", list, root)
	}
	problems, err := Check(root, list)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// README.md stays a front door of at most readmeMaxLines lines.
func TestREADMEIsShort(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to a page of docs/ and link it", n, readmeMaxLines)
	}
}
