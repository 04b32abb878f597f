package docscheck

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// A link is one inline link or image of a page, where it was written.
type link struct {
	line   int
	target string
}

var (
	// inlineLink matches [text](target) and ![alt](target), with an
	// optional "title"; text holds no brackets in these pages.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	heading    = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	// headingLink is a link inside a heading, of which only the text
	// reaches the anchor.
	headingLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// proseLines calls f with each line of a page that a renderer treats as
// prose, that is outside fenced code blocks, numbered from 1. A fence may
// be indented (inside a list item).
func proseLines(page string, f func(n int, line string)) {
	inFence := false
	var fence string
	for i, line := range strings.Split(page, "\n") {
		trimmed := strings.TrimSpace(line)
		if marker := fenceMarker(trimmed); marker != "" {
			switch {
			case !inFence:
				inFence, fence = true, marker
				continue
			case strings.HasPrefix(trimmed, fence) && strings.TrimLeft(trimmed, fence[:1]) == "":
				inFence = false
				continue
			}
		}
		if !inFence {
			f(i+1, line)
		}
	}
}

// fenceMarker is the run of backticks or tildes that opens or closes a
// fenced block at the start of trimmed, or "".
func fenceMarker(trimmed string) string {
	for _, c := range []string{"`", "~"} {
		n := len(trimmed) - len(strings.TrimLeft(trimmed, c))
		if n >= 3 {
			return strings.Repeat(c, n)
		}
	}
	return ""
}

// links lists the inline links of a page outside code.
func links(page string) []link {
	var out []link
	proseLines(page, func(n int, line string) {
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			out = append(out, link{line: n, target: m[1]})
		}
	})
	return out
}

// anchors is the set of anchors a page's headings get, as GitHub names
// them: a repeated slug gets -1, -2, ... in order.
func anchors(page string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	proseLines(page, func(_ int, line string) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		s := slug(m[2])
		if k := seen[s]; k > 0 {
			out[s+"-"+strconv.Itoa(k)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	})
	return out
}

// slug is the anchor GitHub gives a heading: its text (a link's text, not
// its target) lowercased, with everything but letters, digits, spaces,
// hyphens and underscores dropped and each space made a hyphen.
func slug(text string) string {
	text = headingLink.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}
