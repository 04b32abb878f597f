package microvm

import (
	"context"
	"errors"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
)

// vmSession is a microVM created with Config.Session: its agent runs jobs
// one after another (goinit's session.go, each job under a keeper in the
// reaper's pid namespace), and it offers sandbox.Session instead of Run.
// It is a type of its own so that a plain sandbox is never found to
// implement Session. Its memory limit is the sandbox's for every job (the
// guest cgroup holds the session's processes, whichever job started
// them): a job's MemoryBytes is not applied.
type vmSession struct {
	*vmSandbox
}

var _ sandbox.Session = (*vmSession)(nil)

// errSessionRun is Run called on a session sandbox.
var errSessionRun = errors.New("a session sandbox runs its jobs with RunNext, not Run")

// Run implements sandbox.Sandbox: a session sandbox refuses it.
func (s *vmSession) Run(context.Context, sandbox.Job) (sandbox.Outcome, error) {
	return sandbox.Outcome{}, errSessionRun
}

// RunNext implements sandbox.Session.
func (s *vmSession) RunNext(ctx context.Context, job sandbox.Job) (sandbox.Outcome, error) {
	if s.conn.SessionEnded() || s.destroyed || s.exited() {
		return sandbox.Outcome{}, sandbox.ErrSessionEnded
	}
	if err := hostside.PrepareGroup(s.group, s.background, 0); err != nil {
		return sandbox.Outcome{}, err
	}
	s.background = false
	return s.conn.RunNext(ctx, job)
}

// ReadFile implements sandbox.Session.
func (s *vmSession) ReadFile(ctx context.Context, path string, max int64) ([]byte, error) {
	return s.conn.ReadFile(ctx, path, max)
}

// WriteFile implements sandbox.Session.
func (s *vmSession) WriteFile(ctx context.Context, path string, data []byte) error {
	return s.conn.WriteFile(ctx, path, data)
}

// Alive implements sandbox.Session: QEMU runs and no job ended the
// session.
func (s *vmSession) Alive() bool {
	return !s.destroyed && s.vm != nil && !s.exited() && !s.conn.SessionEnded()
}
