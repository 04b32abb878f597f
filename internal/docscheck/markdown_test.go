package docscheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The anchors are GitHub's, for the kinds of heading these pages have.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Admission: as many sandboxes as the machine has room for": "admission-as-many-sandboxes-as-the-machine-has-room-for",
		"Any OCI image as a runtime: python3.12":                   "any-oci-image-as-a-runtime-python312",
		"Run code: `scratchrun exec`":                              "run-code-scratchrun-exec",
		"The API: the request, the result, the HTTP routes":        "the-api-the-request-the-result-the-http-routes",
		"ScratchRun — design as built":                             "scratchrun--design-as-built",
		"Install and run (one command)":                            "install-and-run-one-command",
		"See [the API](api.md)":                                    "see-the-api",
		"snake_case and-hyphens":                                   "snake_case-and-hyphens",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// Links and headings inside code (fences, indented fences, code spans) are
// text; a repeated heading's anchors are numbered.
func TestLinksAndAnchors(t *testing.T) {
	page := strings.Join([]string{
		"# Title",
		"See [a](a.md) and ![img](img/x.png \"title\"), `[not](code.md)`.",
		"```sh",
		"# not a heading",
		"echo [no](fence.md)",
		"```",
		"- item",
		"",
		"  ```",
		"  [no](indented.md)",
		"  ```",
		"## Part",
		"## Part",
		"[b](b.md#part-1) and [ext](https://example.com/x.md)",
	}, "\n")
	var got []string
	for _, l := range links(page) {
		got = append(got, l.target)
	}
	if want := []string{"a.md", "img/x.png", "b.md#part-1", "https://example.com/x.md"}; !slices.Equal(got, want) {
		t.Errorf("links = %q, want %q", got, want)
	}
	if l := links(page); l[2].line != 14 {
		t.Errorf("b.md#part-1 on line %d, want 14", l[2].line)
	}
	a := anchors(page)
	for _, want := range []string{"title", "part", "part-1"} {
		if !a[want] {
			t.Errorf("anchors lack %q: %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Errorf("a line in a fence became an anchor: %v", a)
	}
}

// Check reports a missing file, a missing anchor and a link out of the
// tree, and follows neither schemes nor good links.
func TestCheck(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Top\n[ok](docs/a.md#here) [dir](docs/) [self](#top) [gone](docs/gone.md)\n[ext](https://x.test/)\n")
	write("docs/a.md", "# A\n## Here\n[up](../README.md#top) [bad](../README.md#nowhere) [out](../../x.md) [same](#nope)\n")
	problems, err := Check(root, []string{"README.md", "docs/a.md"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	want := []string{
		`README.md:2: link "docs/gone.md": no file docs/gone.md`,
		`docs/a.md:3: link "../README.md#nowhere": no heading gives that anchor`,
		`docs/a.md:3: link "../../x.md": no file ../x.md`,
		`docs/a.md:3: link "#nope": no heading gives that anchor`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
