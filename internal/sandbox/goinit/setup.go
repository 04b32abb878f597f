package goinit

import (
	"errors"
	"os"

	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// The first exchange with the engine, alike for gVisor's init and the
// microVM agent (and, for its answer, the reaper's with init): the setup
// comes in on the control stream, and the status stream says ready or why
// not.

// readSetup reads the engine's setup from control. An engine of another
// build is told why on status; anything else malformed gets no answer (the
// engine's timeout reports it). ok is false when there is no setup to act
// on.
func readSetup(control, status *os.File) (setup initproto.SetupMessage, ok bool) {
	if err := initproto.ReadMessage(control, initproto.MaxSetupBytes, &setup); err != nil {
		var version *initproto.VersionError
		if errors.As(err, &version) {
			_ = initproto.WriteMessage(status, initproto.ReadyMessage{Error: err.Error()})
		}
		return setup, false
	}
	return setup, true
}

// reportReady says on status that the sandbox is ready or, when prepared
// is an error, why it is not (to the engine; the reaper says it to init).
// It reports whether the sandbox is ready and that was said.
func reportReady(status *os.File, prepared error) bool {
	if prepared != nil {
		_ = initproto.WriteMessage(status, initproto.ReadyMessage{Error: prepared.Error()})
		return false
	}
	return initproto.WriteMessage(status, initproto.ReadyMessage{Ready: true}) == nil
}
