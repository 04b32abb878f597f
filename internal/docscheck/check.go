package docscheck

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Problem is one link that does not resolve.
type Problem struct {
	// File and Line are where the link is written (File relative to the
	// root given to Check).
	File string
	Line int
	// Target is the link as written; Path is the file it names, relative
	// to the root ("" for an anchor in the same page).
	Target string
	Path   string
	// NoFile is true when Path does not exist (otherwise the file is there
	// and its anchor is missing).
	NoFile bool
}

// String says where the link is written and what it lacks.
func (p Problem) String() string {
	if p.NoFile {
		return fmt.Sprintf("%s:%d: link %q: no file %s", p.File, p.Line, p.Target, p.Path)
	}
	return fmt.Sprintf("%s:%d: link %q: no heading gives that anchor", p.File, p.Line, p.Target)
}

// Check reads each page (a slash-separated path relative to root) and
// returns a Problem for each relative link that names no existing file or
// directory, or an anchor no heading of its Markdown file gives. It fails
// only when a page cannot be read.
func Check(root string, pages []string) ([]Problem, error) {
	var problems []Problem
	anchorsOf := map[string]map[string]bool{}
	pageAnchors := func(p string) (map[string]bool, error) {
		if a, ok := anchorsOf[p]; ok {
			return a, nil
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			return nil, err
		}
		anchorsOf[p] = anchors(string(data))
		return anchorsOf[p], nil
	}
	for _, page := range pages {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page)))
		if err != nil {
			return nil, err
		}
		for _, l := range links(string(data)) {
			u, err := url.Parse(l.target)
			if err != nil || u.Scheme != "" || u.Host != "" {
				continue // not a file of this tree: not followed
			}
			p := Problem{File: page, Line: l.line, Target: l.target, Path: page}
			if u.Path != "" {
				p.Path = path.Clean(path.Join(path.Dir(page), u.Path))
				if strings.HasPrefix(p.Path, "../") || p.Path == ".." {
					p.NoFile = true // outside the tree
					problems = append(problems, p)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p.Path))); err != nil {
					p.NoFile = true
					problems = append(problems, p)
					continue
				}
			}
			if u.Fragment == "" || !strings.HasSuffix(p.Path, ".md") {
				continue
			}
			a, err := pageAnchors(p.Path)
			if err != nil {
				return nil, err
			}
			if !a[u.Fragment] {
				problems = append(problems, p)
			}
		}
	}
	return problems, nil
}
