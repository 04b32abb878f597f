package hostside

import (
	"context"
	"encoding"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// Host is what a backend does to one sandbox from outside; a Conn calls it
// when init is done, silent or gone.
type Host interface {
	// Kill ends everything in the sandbox at once, without waiting.
	Kill()
	// Settle returns once the sandbox's processes have ended, after init
	// reported or was killed: at once after a Kill, and otherwise after
	// letting the sandbox end by itself for a while (gVisor's runsc then
	// removes its container) before killing it.
	Settle()
	// Measure adds to out what the host saw of the run (memory-limit
	// kills, refused forks), given init's report res.
	Measure(out *sandbox.Outcome, res initproto.ResultMessage)
	// Diagnostics is what the sandbox's runtime said about itself, for
	// errors: "" or " (runsc: ...)".
	Diagnostics() string
}

// Timeouts bound how long a broken or hostile init can hold the engine,
// not how long user code may run.
type Timeouts struct {
	// Setup is how long init may take to build the sandbox and answer.
	Setup time.Duration
	// Grace is how long init may take after the job's timeout to kill,
	// reap and read return files before the engine kills the sandbox.
	Grace time.Duration
	// Drain bounds waiting for the output pipes once the sandbox ended.
	Drain time.Duration
}

// maxStatusOverhead is room in a status message beyond return files.
const maxStatusOverhead = 1 << 20

// ErrNoAnswer means init did not answer in time and its sandbox was killed.
var ErrNoAnswer = errors.New("no answer from the sandbox's init")

// Conn is the engine's end of one sandbox's init: the protocol of package
// initproto over Pipes, within Timeouts. Nothing init sends is trusted:
// every message is bounded in size, every wait in time, and an init that
// says nothing in time is killed with its sandbox.
type Conn struct {
	*Pipes
	host     Host
	timeouts Timeouts
	// session is set for a session sandbox (StartSession).
	session *session
}

// NewConn makes the pipes of a sandbox that host will start, kill and wait
// for.
func NewConn(host Host, t Timeouts) (*Conn, error) {
	p, err := NewPipes()
	if err != nil {
		return nil, err
	}
	return &Conn{Pipes: p, host: host, timeouts: t}, nil
}

// NewConnWith is NewConn over pipes the backend made itself (a microVM's
// are sockets to its VMM); it owns them from now on. Their child ends, if
// any, are the backend's to hand over and close.
func NewConnWith(host Host, t Timeouts, p *Pipes) *Conn {
	return &Conn{Pipes: p, host: host, timeouts: t}
}

// Setup sends init its setup and waits until it reports the sandbox built.
func (c *Conn) Setup(ctx context.Context, m initproto.SetupMessage) error {
	if err := initproto.WriteMessage(c.Control, m); err != nil {
		return fmt.Errorf("send setup to init: %w%s", err, c.host.Diagnostics())
	}
	var ready initproto.ReadyMessage
	if err := c.decode(ctx, maxStatusOverhead, c.timeouts.Setup, &ready); err != nil {
		return fmt.Errorf("wait for init: %w%s", err, c.host.Diagnostics())
	}
	if !ready.Ready {
		return fmt.Errorf("init could not build the sandbox: %s", ready.Error)
	}
	return nil
}

// Run hands init the job, copies the sandbox's output to the job's writers,
// waits for init's result (until the job's timeout plus the grace period,
// then kills the sandbox), lets the sandbox end, and says what happened.
// Cancelling ctx kills the sandbox; Run then returns ctx's error.
func (c *Conn) Run(ctx context.Context, job sandbox.Job) (sandbox.Outcome, error) {
	drained := drain(job, c.Stdout, c.Stderr)
	if err := initproto.WriteMessage(c.Control, jobMessage(job)); err != nil {
		c.host.Kill()
		c.host.Settle()
		return sandbox.Outcome{}, fmt.Errorf("send job to init: %w%s", err, c.host.Diagnostics())
	}
	// End of file tells init that nothing else comes.
	c.Control.Close()
	c.Control = nil

	// A hostile init may send anything; it may not send more than the
	// return budget allows.
	var res initproto.ResultMessage
	decodeErr := c.decode(ctx, 2*job.MaxReturnBytes+maxStatusOverhead, job.Timeout+c.timeouts.Grace, &res)
	cancelled := ctx.Err()
	c.host.Settle()
	if cancelled != nil {
		return sandbox.Outcome{}, cancelled
	}
	waitDrained(drained, c.timeouts.Drain)
	out := sandbox.Outcome{Files: res.Files, Notes: res.Notes, Duration: res.Duration}
	c.host.Measure(&out, res)
	out, err := classify(out, res, decodeErr, job.Timeout)
	if err != nil && !errors.Is(err, errNotStarted) {
		err = fmt.Errorf("%w%s", err, c.host.Diagnostics())
	}
	return out, err
}

// Close closes the engine's ends of the pipes (and the init's, if still
// open). It may be called more than once.
func (c *Conn) Close() error { return c.Pipes.close() }

// errNotStarted is init's refusal to start the program (a missing
// command, an input file it could not write): the call's error, not an
// outcome.
var errNotStarted = sandbox.ErrNotStarted

// classify turns init's report (or its silence, decodeErr) into the job's
// Outcome; out already holds what the host measured. An init that said
// nothing is an outcome only when the host knows why: the engine's
// timeout killed the sandbox, or the memory limit's victim was the whole
// sandbox.
func classify(out sandbox.Outcome, res initproto.ResultMessage, decodeErr error, timeout time.Duration) (sandbox.Outcome, error) {
	killed := int(syscall.SIGKILL)
	switch {
	case decodeErr == nil && res.Error != "" && !res.Started:
		return sandbox.Outcome{}, fmt.Errorf("%w: %s", errNotStarted, res.Error)
	case decodeErr == nil:
		out.ExitCode, out.Signal, out.TimedOut = res.ExitCode, res.Signal, res.TimedOut
	case errors.Is(decodeErr, ErrNoAnswer):
		out.TimedOut = true
		out.ExitCode, out.Signal = 128+killed, killed
		out.Duration = timeout
		out.Notes = append(out.Notes, "The sandbox did not finish within its timeout plus a grace period and was killed whole; return files are lost.")
	case out.OOMKilled:
		// The memory limit's victim was what holds the sandbox together
		// (the namespaces init, gVisor's Sentry): everything died.
		out.ExitCode, out.Signal = 128+killed, killed
		out.Notes = append(out.Notes, "The whole sandbox was killed at the memory limit; return files are lost.")
	case out.MachineOOMKilled:
		out.ExitCode, out.Signal = 128+killed, killed
		out.Notes = append(out.Notes, "The whole sandbox was killed when the machine ran out of memory for sandboxes; return files are lost.")
	default:
		return sandbox.Outcome{}, fmt.Errorf("sandbox init ended without a result: %v", decodeErr)
	}
	if out.Files == nil {
		out.Files = map[string][]byte{}
	}
	return out, nil
}

// decode reads one message of at most max bytes from init's status pipe
// into v, giving up (and killing the sandbox, which ends the read) when
// ctx ends or timeout passes.
func (c *Conn) decode(ctx context.Context, max int64, timeout time.Duration, v encoding.BinaryUnmarshaler) error {
	return decodeStatus(ctx, c.Status, max, timeout, v, c.host.Kill)
}

func decodeStatus(ctx context.Context, status io.Reader, max int64, timeout time.Duration, v encoding.BinaryUnmarshaler, kill func()) error {
	done := make(chan error, 1)
	go func() { done <- initproto.ReadMessage(status, max, v) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		kill()
		<-done
		return fmt.Errorf("%w after %s", ErrNoAnswer, timeout)
	case <-ctx.Done():
		kill()
		<-done
		return ctx.Err()
	}
}

// jobMessage is job as init receives it.
func jobMessage(job sandbox.Job) initproto.JobMessage {
	msg := initproto.JobMessage{
		Argv: job.Argv, Env: job.Env, Dir: job.Dir, ReturnFiles: job.ReturnFiles,
		MaxReturnBytes: job.MaxReturnBytes, Timeout: job.Timeout,
	}
	for _, f := range job.Files {
		msg.Files = append(msg.Files, initproto.JobFile{Path: f.Path, Data: f.Data})
	}
	if r := job.Resident; r != nil {
		msg.Argv = nil // not run: the kernel runs the job
		msg.Resident = &initproto.ResidentJob{Key: r.Key, Argv: r.Argv, Env: r.Env, Dir: r.Dir, Request: r.Request, Interrupt: max(r.Interrupt, 0)}
	}
	return msg
}
