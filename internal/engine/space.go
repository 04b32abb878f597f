package engine

import (
	"bytes"
	"fmt"
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

// spaceNote tells a caller whose program ran out of room where a sandbox
// may write and how much, so that a failed `pip install` or a full /tmp is
// understood as the cap it is. The engine does not see the write that
// failed, only the program's report of it, and says so.
func (e *Engine) spaceNote(stdout, stderr *cappedOutput) string {
	if !stdout.reportsNoSpace() && !stderr.reportsNoSpace() {
		return ""
	}
	return fmt.Sprintf("The program reported \"No space left on device\": a sandbox may write %d MiB to /tmp (and as much to /code and to /dev/shm) "+
		"and %d MiB everywhere else (the writable layer over the image, where pip and npm -g install), all within its memory limit",
		e.cfg.TmpBytes>>20, e.cfg.WritableBytes>>20)
}

// aliasNote says that the runtime asked for was an alias, and what ran.
func aliasNote(alias, runtime, version string) string {
	if version != "" {
		version = " (version " + version + ")"
	}
	return fmt.Sprintf("Runtime %s is an alias the operator set for %s: the code ran with %s%s", alias, runtime, runtime, version)
}
