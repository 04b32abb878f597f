package mcpserver

import (
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// The session tools look a session up (SessionService.Session) and never
// list the caller's sessions (a cluster's list asks every worker) nor read
// a file to learn why one is gone: a run costs one look-up and the call,
// and a session that ended, was lost or never was is told in the
// look-up's words.
func TestSessionToolsLookUpWithoutListingOrProbing(t *testing.T) {
	svc := newFakeSessions(true)
	cs := connect(t, svc, Options{}, nil)
	id := openSession(t, cs, map[string]any{"runtime": "python3.13"})
	for range 3 {
		if res := callTool(t, cs, SessionRunToolName, map[string]any{"session_id": id, "code": "echo hi"}); res.IsError {
			t.Fatalf("run: %s", textOf(t, res.Content[0]))
		}
	}
	ended := openSession(t, cs, map[string]any{"runtime": "python3.13"})
	svc.end(ended, execapi.EndMaxLifetime)
	lost := openSession(t, cs, map[string]any{"runtime": "python3.13"})
	svc.lose(lost)
	for id, want := range map[string]string{
		ended:                  "it reached its maximum lifetime",
		lost:                   "(session_lost)",
		execapi.NewSessionID(): "(session_not_found)",
	} {
		if msg := errorText(t, callTool(t, cs, SessionRunToolName, map[string]any{"session_id": id, "code": "echo"})); !strings.Contains(msg, want) {
			t.Errorf("run: %q, want it to contain %q", msg, want)
		}
	}
	if res := callTool(t, cs, SessionCloseToolName, map[string]any{"session_id": id}); res.IsError {
		t.Fatalf("close: %s", textOf(t, res.Content[0]))
	}
	if lists, reads := svc.asked(); lists != 0 || reads != 0 {
		t.Errorf("the tools listed %d times and read %d files, want neither", lists, reads)
	}
	svc.mu.Lock()
	n := len(svc.checked)
	svc.mu.Unlock()
	if n != 3 {
		t.Errorf("%d calls reached ExecInSession, want the 3 runs of the open session", n)
	}
}
