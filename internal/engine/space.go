package engine

import (
	"bytes"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// noSpaceTexts are how ENOSPC reads in what programs print: strerror's text
// (C tools, Python's OSError, pip) and Node's error code.
var noSpaceTexts = [][]byte{[]byte("No space left on device"), []byte("no space left on device"), []byte("ENOSPC")}

// reportsNoSpace reports whether the kept output mentions ENOSPC.
func (c *cappedOutput) reportsNoSpace() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range noSpaceTexts {
		if bytes.Contains(c.buf, t) {
			return true
		}
	}
	return false
}

// noSpace is the NoSpace fact when the program's output reports running
// out of room, nil otherwise: the engine does not see the write that failed,
// only the program's report of it.
func (e *Engine) noSpace(stdout, stderr *cappedOutput) *execapi.NoSpace {
	if !stdout.reportsNoSpace() && !stderr.reportsNoSpace() {
		return nil
	}
	return &execapi.NoSpace{TmpMB: e.cfg.TmpBytes >> 20, WritableMB: e.cfg.WritableBytes >> 20}
}
