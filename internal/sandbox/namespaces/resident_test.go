package namespaces

import (
	"testing"

	"github.com/scratchrun/scratchrun/internal/sandbox/sessiontest"
)

// openKernel opens a session on runtime's image with its kernel kind, as
// the engine starts it.
func openKernel(t *testing.T, runtime, kind, ext string) *sessiontest.Kernel {
	t.Helper()
	_, rt := env.Image(t, runtime)
	_, ss := openSession(t, runtime)
	return sessiontest.NewKernel(t, ss, rt, kind, ext)
}

// A session's Python kernel keeps its state, is interrupted and lost as
// sessiontest.PythonKernel says.
func TestSessionPythonKernel(t *testing.T) {
	sessiontest.PythonKernel(t, openKernel(t, "python3.13", "python", ".py"))
}

// A session's Node kernel keeps its globals and is interrupted as
// sessiontest.NodeKernel says.
func TestSessionNodeKernel(t *testing.T) {
	sessiontest.NodeKernel(t, openKernel(t, "node20", "node", ".js"))
}
