package hostside

import (
	"context"
	"encoding"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// A session sandbox's Conn keeps its control pipe open and speaks
// initproto's Requests on it, one at a time (see initproto.Request); its
// output pipes are read for the sandbox's whole life (sessionOutput). Run
// and its drain stay as they are for plain sandboxes.

// session is a session sandbox's side of a Conn.
type session struct {
	// mu makes the session's requests one at a time: init answers them in
	// order, and a job's output is told from the next by when it ends.
	mu  sync.Mutex
	out *sessionOutput
	// ended is read without mu: whether a session is over must not wait
	// for the job in flight.
	ended atomic.Bool
}

// StartSession makes c a session sandbox's Conn: call it once, after Setup
// of a setup with Session set. From then on the output pipes are read
// until the sandbox ends, and RunNext, ReadFile and WriteFile may be
// called; Run may not.
func (c *Conn) StartSession() {
	c.session = &session{out: newSessionOutput(c.Stdout, c.Stderr)}
}

// SessionEnded reports whether a session can run nothing more: a job
// ended it, or init did not answer. It does not wait for a job in flight.
func (c *Conn) SessionEnded() bool {
	s := c.session
	if s == nil {
		return true
	}
	return s.ended.Load()
}

// errNotSession is a session method called on a plain sandbox's Conn.
var errNotSession = errors.New("not a session sandbox")

// take locks the session for one request; the caller unlocks s.mu.
func (c *Conn) take() (*session, error) {
	s := c.session
	if s == nil {
		return nil, errNotSession
	}
	s.mu.Lock()
	if s.ended.Load() {
		s.mu.Unlock()
		return nil, sandbox.ErrSessionEnded
	}
	return s, nil
}

// end ends the session: init is killed, and with it the sandbox's
// processes (s.mu held).
func (c *Conn) end(s *session) {
	s.ended.Store(true)
	c.host.Kill()
}

// Session notes, one sentence each.
const (
	noteSessionMemory   = "The session used more than its memory limit over its calls and was ended; its files and processes are gone."
	noteSessionMachine  = "The session was ended when the machine ran out of memory for sandboxes; its files and processes are gone."
	noteNotSeparable    = "The call's processes could not be told apart from the session's at its end; the session was ended."
	noteSessionNoAnswer = "The session was ended with its sandbox."
)

// RunNext runs one more job in the session: see sandbox.Session. The
// job's timeout, or ctx's end (a cancel sent to init), kills the job's own
// processes; an init that does not answer within the timeout plus the
// grace period (and the time it may take to separate) is killed, and with
// it the session.
func (c *Conn) RunNext(ctx context.Context, job sandbox.Job) (sandbox.Outcome, error) {
	s, err := c.take()
	if err != nil {
		return sandbox.Outcome{}, err
	}
	defer s.mu.Unlock()
	if r := job.Resident; r != nil && (r.Key == "" || len(r.Argv) == 0) {
		return sandbox.Outcome{}, errors.New("resident job has no key or no kernel command")
	}
	if len(job.Argv) == 0 && job.Resident == nil {
		return sandbox.Outcome{}, errors.New("job has no command")
	}
	dropped := s.out.start(job.Stdout, job.Stderr)
	if err := initproto.WriteMessage(c.Control, initproto.Request{Kind: initproto.RequestJob, Job: jobMessage(job)}); err != nil {
		c.end(s)
		s.out.settle(0)
		return sandbox.Outcome{}, fmt.Errorf("send job to init: %w%s", err, c.host.Diagnostics())
	}
	var res initproto.ResultMessage
	decodeErr := c.awaitJob(ctx, job, &res)
	s.out.settle(c.timeouts.Drain)
	out := sandbox.Outcome{Files: res.Files, Notes: res.Notes, Duration: res.Duration, BetweenCallsBytes: dropped}
	c.host.Measure(&out, res)
	if cancelled := ctx.Err(); cancelled != nil {
		if decodeErr != nil || !res.Separated || out.OOMKilled || out.MachineOOMKilled {
			c.end(s)
		}
		// What became of the kernel is the caller's to know even so: the
		// cancel may have cost it.
		return sandbox.Outcome{ResidentStarted: res.ResidentStarted, ResidentLost: res.ResidentLost}, cancelled
	}
	out, err = classify(out, res, decodeErr, job.Timeout)
	if errors.Is(err, errNotStarted) {
		return out, err // nothing of the job ran: the session goes on
	}
	if err != nil {
		c.end(s)
		return out, fmt.Errorf("%w%s", err, c.host.Diagnostics())
	}
	out.Separated, out.Left = res.Separated, int(min(res.Left, 1<<20))
	out.ResidentStarted, out.ResidentLost = res.ResidentStarted, res.ResidentLost
	killed := int(syscall.SIGKILL)
	switch {
	case out.OOMKilled:
		// Memory is the session's, whichever call's process the kernel
		// chose: what is left cannot be trusted to be whole.
		out.ExitCode, out.Signal = 128+killed, killed
		out.Notes = append(out.Notes, noteSessionMemory)
	case out.MachineOOMKilled:
		out.ExitCode, out.Signal = 128+killed, killed
		out.Notes = append(out.Notes, noteSessionMachine)
	case errors.Is(decodeErr, ErrNoAnswer):
		out.Notes = append(out.Notes, noteSessionNoAnswer)
	case !res.Separated:
		out.Notes = append(out.Notes, noteNotSeparable)
	}
	if out.OOMKilled || out.MachineOOMKilled || decodeErr != nil || !res.Separated {
		out.Ended = true
		out.Separated = false
		c.end(s)
	}
	return out, nil
}

// awaitJob waits for init's result of the job in flight. When ctx ends
// first, it sends init a cancel and waits on; when init says nothing
// within the job's timeout plus the grace period (and the time init may
// take to separate the job's processes), it kills the sandbox.
func (c *Conn) awaitJob(ctx context.Context, job sandbox.Job, res *initproto.ResultMessage) error {
	done := make(chan error, 1)
	go func() { done <- initproto.ReadMessage(c.Status, 2*job.MaxReturnBytes+maxStatusOverhead, res) }()
	// A kernel has its interrupt's grace after the timeout or cancel.
	var interrupt time.Duration
	if job.Resident != nil {
		interrupt = max(job.Resident.Interrupt, 0)
	}
	bound := job.Timeout + c.timeouts.Grace + initproto.SeparateWithin + interrupt
	timer := time.NewTimer(bound)
	defer timer.Stop()
	cancel := ctx.Done()
	for {
		select {
		case err := <-done:
			return err
		case <-cancel:
			cancel = nil
			if err := initproto.WriteMessage(c.Control, initproto.Request{Kind: initproto.RequestCancel}); err != nil {
				c.host.Kill()
			}
			timer.Reset(c.timeouts.Grace + initproto.SeparateWithin + interrupt)
		case <-timer.C:
			c.host.Kill()
			<-done
			return fmt.Errorf("%w after %s", ErrNoAnswer, bound)
		}
	}
}

// ReadFile reads one file of the session's sandbox: see sandbox.Session.
func (c *Conn) ReadFile(ctx context.Context, path string, max int64) ([]byte, error) {
	if max < 0 || max > initproto.MaxFileReadBytes {
		return nil, fmt.Errorf("a read of up to %d bytes is over the limit of %d", max, initproto.MaxFileReadBytes)
	}
	var m initproto.FileMessage
	if err := c.fileRequest(ctx, initproto.Request{Kind: initproto.RequestFileRead, Path: path, Max: max}, max, &m); err != nil {
		return nil, err
	}
	if m.Error != "" {
		return nil, &FileError{Path: path, Reason: m.Error}
	}
	if int64(len(m.Data)) > max {
		return nil, fmt.Errorf("init returned %d bytes of %s, more than the %d asked for", len(m.Data), path, max)
	}
	if m.Data == nil {
		m.Data = []byte{}
	}
	return m.Data, nil
}

// WriteFile writes one file into the session's sandbox: see
// sandbox.Session.
func (c *Conn) WriteFile(ctx context.Context, path string, data []byte) error {
	var m initproto.FileMessage
	if err := c.fileRequest(ctx, initproto.Request{Kind: initproto.RequestFileWrite, Path: path, Data: data}, 0, &m); err != nil {
		return err
	}
	if m.Error != "" {
		return &FileError{Path: path, Reason: m.Error}
	}
	return nil
}

// FileError is init's refusal of a session's file read or write.
type FileError struct {
	Path, Reason string
}

func (e *FileError) Error() string { return fmt.Sprintf("%s: %s", e.Path, e.Reason) }

// Unwrap makes a refusal sandbox.ErrFileRefused, which the engine tells
// from a session that failed without knowing this package.
func (e *FileError) Unwrap() error { return sandbox.ErrFileRefused }

// fileRequest sends one file request and waits for init's answer. Init
// does it at once, so the wait is bounded by the grace period, not by ctx:
// a cancel cannot stop it halfway, and an init that does not answer is
// broken and killed, ending the session.
func (c *Conn) fileRequest(_ context.Context, req initproto.Request, max int64, m encoding.BinaryUnmarshaler) error {
	s, err := c.take()
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if err := initproto.WriteMessage(c.Control, req); err != nil {
		c.end(s)
		return fmt.Errorf("send file request to init: %w%s", err, c.host.Diagnostics())
	}
	if err := decodeStatus(context.Background(), c.Status, max+maxStatusOverhead, c.timeouts.Setup, m, c.host.Kill); err != nil {
		c.end(s)
		return fmt.Errorf("wait for init: %w%s", err, c.host.Diagnostics())
	}
	return nil
}

// Quiet runs fn while the session has no request in flight and none can
// start (a fork copies its files between jobs); it fails as the session's
// methods do once the session has ended.
func (c *Conn) Quiet(fn func() error) error {
	s, err := c.take()
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	return fn()
}
