package engine

import (
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/sandboxtest"
)

// Notes an init composed (a return file's path is the caller's text, and
// user code picks the names it leaves behind) reach the caller only with
// control and format characters escaped: a U+202E in a path must not turn
// the rest of the note around, and an escape sequence must not reach a
// terminal.
func TestNotesEscapeControlAndFormatCharacters(t *testing.T) {
	hostile := []string{
		"Return file /tmp/\u202egnp.exe was not returned: it does not exist.",
		"Return file /tmp/a\x1b[2Jb was not returned: it does not exist.",
		"Return file /tmp/line\nbreak\r\tand\u2028sep\u2066iso\u2069 was not returned.",
		"Return file /tmp/zero\u200bwidth\ufeff\u00ad was not returned.",
		"Return file /tmp/bad\xffbyte\x00nul\x7fdel\u0085nel was not returned.",
		`Return file /tmp/back\slash was not returned.`,
	}
	c := execapi.Checked{Timeout: time.Second, MemoryMB: 64}
	out := sandbox.Outcome{Notes: hostile, Files: map[string][]byte{}}
	e := &Engine{backend: &sandboxtest.Backend{}} // enforces every limit
	res := e.result(c, out, sandbox.Teardown{Purged: true}, &cappedOutput{}, &cappedOutput{}, nil)
	for _, r := range res.Note {
		if r == unicode.ReplacementChar || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			t.Errorf("note carries %U: %q", r, res.Note)
		}
	}
	for _, want := range []string{
		`/tmp/\u202egnp.exe`, `/tmp/a\x1b[2Jb`, `/tmp/line\nbreak\r\tand\u2028sep\u2066iso\u2069`,
		`/tmp/zero\u200bwidth\ufeff\u00ad`, `/tmp/bad\xffbyte\x00nul\x7fdel\u0085nel`, `/tmp/back\\slash`,
	} {
		if !strings.Contains(res.Note, want) {
			t.Errorf("note %q lacks %q", res.Note, want)
		}
	}
	// Ordinary text, accents and other scripts included, passes unchanged.
	plain := "Return file /tmp/café/日本語.png was not returned: it does not exist."
	res = e.result(c, sandbox.Outcome{Notes: []string{plain}}, sandbox.Teardown{Purged: true}, &cappedOutput{}, &cappedOutput{}, nil)
	if res.Note != plain {
		t.Errorf("note %q, want %q unchanged", res.Note, plain)
	}
}
