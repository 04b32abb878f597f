package execapi

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// EscapeNote makes a note safe to show: control characters (a terminal's
// escape sequences, line breaks), Unicode format characters (U+202E turns
// the rest of a line around; zero-width ones hide text) and the line and
// paragraph separators are written as Go-style escapes, as is a byte that
// is not UTF-8, and a backslash is doubled so an escape cannot be faked.
// Notes name paths the caller chose and user code left behind; the inits
// that compose them are not trusted, so an Executor escapes what a sandbox
// says (Facts.SandboxNotes) once, on its way out.
func EscapeNote(s string) string {
	clean := true
	for _, r := range s {
		if needsEscape(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < utf8.RuneSelf && needsEscape(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case needsEscape(r) && r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		case needsEscape(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// needsEscape reports whether r is shown escaped (utf8.RuneError stands for
// a byte that is not UTF-8, as range over a string yields it).
func needsEscape(r rune) bool {
	return r == '\\' || r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) ||
		unicode.In(r, unicode.Zl, unicode.Zp)
}
