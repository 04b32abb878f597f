package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/engine/kernel"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// bashStateDir is where a session's bash calls keep their exported
// variables and working directory (kernel.BashCommand).
const bashStateDir = "/code/.session"

// errBusyTooLong is a call that waited for the session's previous call
// for all of its own timeout: it did not run.
var errBusyTooLong = fmt.Errorf("the session's previous call still ran when this call's timeout passed; it did not run: %w", context.DeadlineExceeded)

// ExecInSession implements execapi.SessionService. Calls of one session
// run one at a time: a second waits for the first, bounded by its own
// timeout (and its context), and then fails with that deadline. It is
// admitted as a call into a running sandbox (AcquireRunning), its output
// capped as a call's is.
func (e *Engine) ExecInSession(ctx context.Context, ref execapi.SessionRef, c execapi.Checked, events execapi.EventSink) (execapi.SessionResult, error) {
	received := time.Now()
	r := e.sessions
	s, err := r.lookup(ctx, ref.ID, false)
	if err != nil {
		return execapi.SessionResult{}, err
	}
	rt := s.rt
	if c.Runtime != "" && c.Runtime != rt.Runtime.Name && c.Runtime != rt.Alias {
		if rt, err = e.store.Resolve(c.Runtime); err != nil || rt.RootFS != s.rt.RootFS {
			return execapi.SessionResult{}, &execapi.Refusal{Reason: execapi.RefusedUnknownRuntime, Field: "runtime",
				Detail: fmt.Sprintf("a call in this session may name only a runtime of its image (%s)", s.rt.Runtime.Name)}
		}
	}
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	wait, stopWait := context.WithTimeoutCause(callCtx, c.Timeout, errBusyTooLong)
	err = r.take(wait, s, cancel)
	stopWait()
	if err != nil {
		return execapi.SessionResult{}, err
	}
	ticket, err := e.adm.AcquireRunning(callCtx, s.owner, c.Timeout)
	if err != nil {
		r.give(s)
		return execapi.SessionResult{}, admissionError(err)
	}
	admitted := time.Now()
	ran := time.Duration(0)
	defer func() { ticket.Release(ran) }()

	var emitMu sync.Mutex
	emit := func(kind execapi.EventKind, data []byte) {
		if events == nil {
			return
		}
		emitMu.Lock()
		defer emitMu.Unlock()
		events(execapi.Event{Kind: kind, Data: data, Elapsed: time.Since(received)})
	}
	emit(execapi.EventAdmitted, nil)
	var meter func() (time.Duration, bool)
	if m, ok := sandbox.SandboxAs[sandbox.CPUMeter](s.l.sb); ok {
		meter = m.CPUDemand
	}
	ticket.Started(meter)
	emit(execapi.EventStarted, nil)
	stdout := &cappedOutput{limit: e.cfg.OutputLimitBytes, kind: execapi.EventStdout, emit: emit}
	stderr := &cappedOutput{limit: e.cfg.OutputLimitBytes, kind: execapi.EventStderr, emit: emit}
	s.calls++
	job, err := e.sessionJob(s, c, rt.Runtime, s.calls, stdout, stderr)
	if err != nil {
		r.give(s)
		return execapi.SessionResult{}, err
	}
	o, runErr := s.ss.RunNext(callCtx, job)
	if runErr != nil {
		return execapi.SessionResult{}, r.failed(s, runErr)
	}
	ran = time.Since(admitted)
	res := execapi.SessionResult{Result: e.result(c, o, sandbox.Teardown{}, stdout, stderr, aliasOf(rt))}
	res.Session = execapi.SessionCallInfo{ID: s.id, BetweenCallsOutputBytes: o.BetweenCallsBytes}
	if job.Resident != nil {
		res.Session.Interpreter = s.interpreter(job.Resident.Key, o)
	}
	if o.Ended {
		if o.OOMKilled || o.MachineOOMKilled {
			// Whichever process the kernel killed, the call is reported as
			// killed: its session's memory is gone with it.
			res.ExitCode = execapi.ExitKilled
		}
		end := r.endTaken(s, endReason(o))
		res.Session.Ended = &end
	} else {
		r.give(s)
		res.Session.ExpiresAt = r.snapshot(s).ExpiresAt
	}
	res.FinishInSession()
	return res, nil
}

// failed ends a call whose RunNext failed: a session that was being
// ended (closed, past its lifetime) is its *SessionEndedError, one whose
// sandbox stopped is ended as lost; otherwise the session lives on (the
// caller went away, say).
func (r *sessions) failed(s *session, runErr error) error {
	r.mu.Lock()
	ending := s.ending != ""
	r.mu.Unlock()
	switch {
	case ending:
		r.give(s)
		<-s.done
		return &execapi.SessionEndedError{End: s.end}
	case errors.Is(runErr, sandbox.ErrSessionEnded) || !s.ss.Alive():
		return &execapi.SessionEndedError{End: r.endTaken(s, execapi.EndSandboxLost)}
	case errors.Is(runErr, sandbox.ErrNotStarted):
		// Nothing ran and the session is whole: the caller must hear
		// why (a full space it can free), not an internal error.
		r.give(s)
		return &execapi.CallNotStartedError{Reason: strings.TrimPrefix(runErr.Error(), sandbox.ErrNotStarted.Error()+": ")}
	}
	r.give(s)
	return runErr
}

// endReason is why a session whose job said Ended is over.
func endReason(o sandbox.Outcome) execapi.SessionEndReason {
	switch {
	case o.OOMKilled || o.MachineOOMKilled:
		return execapi.EndMemoryLimit
	case o.TimedOut && !o.Separated:
		return execapi.EndTimeoutUnseparable
	}
	return execapi.EndSandboxLost
}

// interpreter records what a resident job did to its kernel and says so
// as SessionCallInfo.Interpreter.
func (s *session) interpreter(key string, o sandbox.Outcome) string {
	k := s.kernels[key]
	said := execapi.InterpreterKept
	if o.ResidentStarted {
		said = execapi.InterpreterStarted
		if k.ever {
			said = execapi.InterpreterRestarted
		}
		k.ever = true
	}
	k.alive = !o.ResidentLost
	s.kernels[key] = k
	return said
}

// aliasOf is the Alias of a resolved runtime named by an alias (nil
// otherwise).
func aliasOf(rt images.Resolved) *execapi.Alias {
	if rt.Alias == "" {
		return nil
	}
	return &execapi.Alias{Requested: rt.Alias, Runtime: rt.Runtime.Name, Version: rt.Runtime.Version}
}

// sessionJob is the job of call n in s: the code written to a file of
// its own (so that tracebacks of earlier cells still show their lines),
// handed to the runtime's kernel (python, node), run in bash's wrapper
// that keeps exported variables and the directory, or run as a plain
// call's.
func (e *Engine) sessionJob(s *session, c execapi.Checked, rt images.Runtime, n int, stdout, stderr *cappedOutput) (sandbox.Job, error) {
	codePath := path.Join(codeDir, codeFileName(n, path.Ext(rt.File)))
	env := make(map[string]string, len(s.env)+len(c.Env))
	for k, v := range s.env {
		env[k] = v
	}
	for k, v := range c.Env {
		env[k] = v
	}
	files := make([]sandbox.File, 0, len(c.Files)+1)
	for _, f := range c.Files {
		files = append(files, sandbox.File{Path: f.Path, Data: f.Data})
	}
	files = append(files, sandbox.File{Path: codePath, Data: []byte(c.Code)})
	job := sandbox.Job{
		Env:            e.environment(env, rt),
		Dir:            workDir,
		Files:          files,
		ReturnFiles:    c.ReturnFiles,
		MaxReturnBytes: e.cfg.MaxReturnBytes,
		Timeout:        c.Timeout,
		Stdout:         stdout,
		Stderr:         stderr,
	}
	switch rt.Session {
	case images.SessionPython, images.SessionNode:
		argv, err := kernel.Command(rt.Session, rt.WarmCommand)
		if err != nil {
			return sandbox.Job{}, err
		}
		job.Argv = argv
		job.Resident = &sandbox.Resident{Key: rt.Name, Argv: argv, Env: e.environment(nil, rt), Dir: workDir,
			Request: kernel.Request(workDir, codePath, job.Env), Interrupt: e.sessions.cfg.Interrupt}
	case images.SessionBash:
		job.Argv = kernel.BashCommand(rt.Command[0], codePath, bashStateDir, job.Env)
	default:
		job.Argv = make([]string, len(rt.Command))
		for i, a := range rt.Command {
			job.Argv[i] = strings.ReplaceAll(a, images.FilePlaceholder, codePath)
		}
	}
	return job, nil
}

// codeFileName names call n's code file. The random part is what user code
// of earlier calls cannot know: with a name it could, it plants a link (or a
// fifo, a directory) there, init refuses to write through it, and the
// session's next calls fail before they run.
func codeFileName(n int, ext string) string {
	return fmt.Sprintf("call-%d-%s%s", n, strings.ToLower(rand.Text()[:8]), ext)
}
