package gvisor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/engine/kernel"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/sessiontest"
)

// On runsc, as on namespaces, a session's Python kernel keeps its state,
// is interrupted and lost as sessiontest.PythonKernel says; and a key
// beyond the session's kernels is refused.
func TestSessionPythonKernel(t *testing.T) {
	_, rt := env.Image(t, "python3.13")
	_, ss := openSessionOn(t, "python3.13")
	k := sessiontest.NewKernel(t, ss, rt, "python", ".py")
	sessiontest.PythonKernel(t, k)
	// The session keeps four kernels: a fifth key is refused, and the
	// session goes on.
	const long, grace = 30 * time.Second, 2 * time.Second
	for i := 1; i < 4; i++ {
		k.Key = fmt.Sprintf("python-%d", i)
		if c := k.Cell(t, long, grace, "print('up')"); !c.ResidentStarted || c.Stdout != "up\n" {
			t.Errorf("kernel %d: %+v, stdout %q, stderr %q", i, c.Outcome, c.Stdout, c.Stderr)
		}
	}
	_, err := ss.RunNext(context.Background(), sandbox.Job{Argv: k.Argv, Timeout: long,
		Resident: &sandbox.Resident{Key: "python-4", Argv: k.Argv, Dir: "/tmp", Request: kernel.Request("/tmp", "/code/none.py", nil)}})
	if err == nil || !strings.Contains(err.Error(), "at most 4 interpreters") {
		t.Errorf("a fifth kernel: %v", err)
	}
	if !ss.Alive() {
		t.Error("the session is not alive")
	}
}
