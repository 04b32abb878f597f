package namespaces

import (
	"context"
	"errors"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
)

// nsSession is a namespaces sandbox created with Config.Session: its init
// runs jobs one after another (spawner/c/session.c), and it offers
// sandbox.Session instead of Run. It is a type of its own so that a plain
// sandbox is never found to implement Session.
type nsSession struct {
	*nsSandbox
	// forks is the cgroup's count of refused forks after the last job:
	// the count is the sandbox's, and each job reports its own part.
	forks int64
}

var _ sandbox.Session = (*nsSession)(nil)

// errSessionRun is Run called on a session sandbox.
var errSessionRun = errors.New("a session sandbox runs its jobs with RunNext, not Run")

// Run implements sandbox.Sandbox: a session sandbox refuses it.
func (s *nsSession) Run(context.Context, sandbox.Job) (sandbox.Outcome, error) {
	return sandbox.Outcome{}, errSessionRun
}

// RunNext implements sandbox.Session.
func (s *nsSession) RunNext(ctx context.Context, job sandbox.Job) (sandbox.Outcome, error) {
	if s.conn.SessionEnded() {
		return sandbox.Outcome{}, sandbox.ErrSessionEnded
	}
	if err := hostside.PrepareGroup(s.group, s.background, job.MemoryBytes); err != nil {
		return sandbox.Outcome{}, err
	}
	s.background = false
	out, err := s.conn.RunNext(ctx, job)
	if err == nil && s.group != nil {
		total := out.ForkFailures
		out.ForkFailures = max(total-s.forks, 0)
		out.PidsLimitHit = out.ForkFailures > 0
		s.forks = total
	}
	return out, err
}

// ReadFile implements sandbox.Session.
func (s *nsSession) ReadFile(ctx context.Context, path string, max int64) ([]byte, error) {
	return s.conn.ReadFile(ctx, path, max)
}

// WriteFile implements sandbox.Session.
func (s *nsSession) WriteFile(ctx context.Context, path string, data []byte) error {
	return s.conn.WriteFile(ctx, path, data)
}

// Alive implements sandbox.Session: init runs and no job ended the
// session.
func (s *nsSession) Alive() bool {
	return s.init != nil && !s.init.Exited() && !s.conn.SessionEnded()
}
