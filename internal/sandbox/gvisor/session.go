package gvisor

import (
	"context"
	"errors"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
)

// gvSession is a gVisor sandbox created with Config.Session: its init runs
// jobs one after another (goinit's session.go, each job under a keeper in
// the reaper's pid namespace), and it offers sandbox.Session instead of
// Run. It is a type of its own so that a plain sandbox is never found to
// implement Session. It has no Forker: runsc's checkpoint is not used, so a
// gVisor session is not copied (ForkKind none).
type gvSession struct {
	*gvSandbox
}

var _ sandbox.Session = (*gvSession)(nil)

// errSessionRun is Run called on a session sandbox.
var errSessionRun = errors.New("a session sandbox runs its jobs with RunNext, not Run")

// Run implements sandbox.Sandbox: a session sandbox refuses it.
func (s *gvSession) Run(context.Context, sandbox.Job) (sandbox.Outcome, error) {
	return sandbox.Outcome{}, errSessionRun
}

// RunNext implements sandbox.Session.
func (s *gvSession) RunNext(ctx context.Context, job sandbox.Job) (sandbox.Outcome, error) {
	if s.conn.SessionEnded() || s.destroyed || s.exited() {
		return sandbox.Outcome{}, sandbox.ErrSessionEnded
	}
	memory := int64(0)
	if job.MemoryBytes > 0 {
		memory = job.MemoryBytes + s.backend.overhead
	}
	if err := hostside.PrepareGroup(s.group, s.background, memory); err != nil {
		return sandbox.Outcome{}, err
	}
	s.background = false
	return s.conn.RunNext(ctx, job)
}

// ReadFile implements sandbox.Session.
func (s *gvSession) ReadFile(ctx context.Context, path string, max int64) ([]byte, error) {
	return s.conn.ReadFile(ctx, path, max)
}

// WriteFile implements sandbox.Session.
func (s *gvSession) WriteFile(ctx context.Context, path string, data []byte) error {
	return s.conn.WriteFile(ctx, path, data)
}

// Alive implements sandbox.Session: runsc runs and no job ended the
// session.
func (s *gvSession) Alive() bool {
	return !s.destroyed && s.cmd != nil && !s.exited() && !s.conn.SessionEnded()
}
