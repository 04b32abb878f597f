package engine

import (
	"sync"
	"unicode/utf8"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// cappedOutput keeps the first limit bytes of a stream and counts the rest.
// It never returns an error, so the sandbox's pipe keeps draining and a
// program printing without end finishes (or times out) instead of blocking.
type cappedOutput struct {
	limit   int
	kind    execapi.EventKind
	emit    func(execapi.EventKind, []byte)
	mu      sync.Mutex
	buf     []byte
	dropped int64
}

func (c *cappedOutput) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.limit - len(c.buf)
	keep := p
	if len(keep) > room {
		keep = keep[:max(room, 0)]
	}
	c.dropped += int64(len(p) - len(keep))
	if len(keep) > 0 {
		c.buf = append(c.buf, keep...)
		if c.emit != nil {
			c.emit(c.kind, append([]byte(nil), keep...))
		}
	}
	return len(p), nil
}

// text returns the kept output; a multi-byte character cut by the cap is
// dropped rather than returned broken.
func (c *cappedOutput) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buf
	if c.dropped > 0 {
		for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
			r, size := utf8.DecodeLastRune(b)
			if r != utf8.RuneError || size != 1 {
				break
			}
			b = b[:len(b)-1]
		}
	}
	return string(b)
}

// cut reports whether the stream was cut at its cap, and how.
func (c *cappedOutput) cut() (execapi.OutputCut, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return execapi.OutputCut{Stream: c.stream(), LimitBytes: c.limit, DroppedBytes: c.dropped}, c.dropped > 0
}

// stream names the stream as notes do.
func (c *cappedOutput) stream() string {
	if c.kind == execapi.EventStderr {
		return "stderr"
	}
	return "stdout"
}
