package engine

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Output capture keeps exactly the first limit bytes (less a cut multi-byte
// character), counts the rest, never errors, and emits only what it keeps.
func FuzzCappedOutput(f *testing.F) {
	f.Add([]byte("hello\n"), []byte("world"), 8)
	f.Add([]byte("héllo"), []byte("wörld"), 2)
	f.Add([]byte{0xff, 0xfe}, []byte("x"), 1)
	f.Add([]byte(""), []byte(""), 0)
	f.Fuzz(func(t *testing.T, a, b []byte, limit int) {
		if limit < 0 || limit > 1<<16 {
			return
		}
		var emitted bytes.Buffer
		c := &cappedOutput{limit: limit, kind: execapi.EventStdout, emit: func(_ execapi.EventKind, d []byte) { emitted.Write(d) }}
		for _, chunk := range [][]byte{a, b} {
			if n, err := c.Write(chunk); n != len(chunk) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		all := append(append([]byte(nil), a...), b...)
		kept := all[:min(len(all), limit)]
		if !bytes.Equal(emitted.Bytes(), kept) {
			t.Fatalf("emitted %q, want %q", emitted.Bytes(), kept)
		}
		if got := int64(len(all) - len(kept)); c.dropped != got {
			t.Fatalf("dropped %d, want %d", c.dropped, got)
		}
		text := c.text()
		if !bytes.HasPrefix(kept, []byte(text)) || len(kept)-len(text) > utf8.UTFMax {
			t.Fatalf("text %q is not kept %q less a cut character", text, kept)
		}
		if cut, ok := c.cut(); (c.dropped > 0) != ok || ok && (cut.Stream != "stdout" || cut.DroppedBytes != c.dropped) {
			t.Fatalf("cut %+v (%v) with %d dropped", cut, ok, c.dropped)
		}
	})
}
