// Package docscheck checks the project's Markdown pages as a reader meets
// them: every relative link in the pages at the top of the tree (README.md,
// BENCHMARKS.md) and in docs/*.md must lead to a file that exists and, when
// it names an #anchor, to a heading of that file, so that moving a section
// between pages cannot leave a link behind that goes nowhere. Its test also holds README.md to a front door's length.
//
// Invariants: only what a renderer would make a link counts (links inside
// code fences and code spans are text); anchors are computed as GitHub
// computes them from a heading's text, so a link that resolves here
// resolves on the repository's pages. Links with a scheme (https:, mailto:)
// are not followed: the check reads only files, never the network.
package docscheck
