package execapi

import (
	"context"
	"fmt"
	"time"
)

// What became of a session's interpreter for a call, as
// SessionCallInfo.Interpreter reports it.
const (
	// InterpreterKept: the call ran in the interpreter of the calls
	// before it.
	InterpreterKept = "kept"
	// InterpreterStarted: the session's first call of its runtime started
	// the interpreter.
	InterpreterStarted = "started"
	// InterpreterRestarted: the interpreter of earlier calls was gone (a
	// call timed out, or it exited) and this call started a fresh one.
	InterpreterRestarted = "restarted"
)

// SessionResult is the result of a call in a session (POST
// /v1/sessions/{id}/exec): a call's Result, whose StatePurged is false
// while the session goes on, and the session's own account.
type SessionResult struct {
	Result
	Session SessionCallInfo `json:"session"`
}

// SessionCallInfo is what a call in a session says of the session.
type SessionCallInfo struct {
	ID string `json:"id"`
	// ExpiresAt is when the session ends if no call comes before (see
	// SessionInfo).
	ExpiresAt time.Time `json:"expires_at"`
	// Interpreter is InterpreterKept, InterpreterStarted or
	// InterpreterRestarted ("" for a runtime without a kernel).
	Interpreter string `json:"interpreter,omitempty"`
	// Ended is set when the session ended with this call (its memory
	// limit, its lifetime): the next use gets a *SessionEndedError.
	Ended *SessionEnd `json:"ended,omitempty"`
	// BetweenCallsOutputBytes counts the output background processes wrote
	// between the last call and this one, which no call could take.
	BetweenCallsOutputBytes int64 `json:"between_calls_output_bytes,omitempty"`
}

// FinishInSession is Finish for a call in a session: StatePurged is the
// session's teardown once it ended (and not news before: the sandbox is
// kept by design), and the note says what the caller must know of the
// session besides the run's facts.
func (r *SessionResult) FinishInSession() {
	ended := r.Session.Ended
	if ended != nil {
		r.StatePurged = ended.StatePurged
	} else {
		r.StatePurged = false
	}
	r.finish(ended != nil)
	if r.Session.Interpreter == InterpreterRestarted {
		r.AddNote("The interpreter of earlier calls was gone (a call timed out, or it exited), so this call started a fresh one: variables and functions defined before are gone; files remain")
	}
	if n := r.Session.BetweenCallsOutputBytes; n > 0 {
		r.AddNote(fmt.Sprintf("%d bytes of output that background processes wrote between calls were dropped", n))
	}
	if ended != nil {
		r.AddNote("The session has ended: " + ended.Reason.sentence() + "; its files and state are gone")
	}
}

// SessionRef names a session to the service that holds it: its id, and
// the worker of a cluster that holds it (for a front end's routing; "" on
// one machine).
type SessionRef struct {
	ID     string
	Worker string
}

// SessionService is an Executor that also holds sessions, type-asserted
// like CheckedExecutor. Every method answers ErrSessionNotFound for an id
// that is not the caller's (execapi.CallerFrom of ctx), a
// *SessionEndedError for the caller's ended one and, from a cluster's
// front end, a *SessionLostError when its worker was lost.
type SessionService interface {
	// SessionPolicy is what ValidateSession was held to.
	SessionPolicy() SessionPolicy
	// OpenSession opens a session for a request that passed
	// ValidateSession; a *Refusal (RefusedKeySessions,
	// RefusedSessionsFull, admission's) when it will not now.
	OpenSession(ctx context.Context, c CheckedSession) (SessionInfo, error)
	// ExecInSession runs a call that passed ValidateInSession.
	ExecInSession(ctx context.Context, ref SessionRef, c Checked, events EventSink) (SessionResult, error)
	// Session is the caller's open session ref names, as ListSessions
	// would list it: the one look-up a front end makes before a call
	// (ValidateInSession needs its settings), which asks only the service
	// that holds the session, not every one.
	Session(ctx context.Context, ref SessionRef) (SessionInfo, error)
	// ListSessions returns the caller's open sessions.
	ListSessions(ctx context.Context) ([]SessionInfo, error)
	// CloseSession ends the session, purges it and reports how.
	CloseSession(ctx context.Context, ref SessionRef) (SessionEnd, error)
	// ReadSessionFile reads one regular file of the session (a path that
	// passed ValidatePath), at most the policy's MaxReturnBytes;
	// ErrSessionFileNotFound when there is none, *FileTooLargeError
	// when it is bigger.
	ReadSessionFile(ctx context.Context, ref SessionRef, path string) ([]byte, error)
	// WriteSessionFile writes one file (a path that passed ValidatePath;
	// at most the policy's MaxFileBytes, which the front end checks) with
	// its missing parents.
	WriteSessionFile(ctx context.Context, ref SessionRef, path string, data []byte) error
	// ForkSession opens a new session of the caller's holding a copy of
	// this one (SessionInfo.Fork says what is copied; ErrForkUnsupported
	// on a level that cannot). It counts toward the caller's maximum.
	ForkSession(ctx context.Context, ref SessionRef) (SessionInfo, error)
}

// SessionAdmin is what an operator has over every caller's sessions (the
// CLI and the console), type-asserted on a SessionService.
type SessionAdmin interface {
	// AllSessions lists every open session, its Owner set.
	AllSessions(ctx context.Context) ([]SessionInfo, error)
	// EndSession ends one session whoever owns it, with EndOperator;
	// ErrSessionNotFound when no open session has the id.
	EndSession(ctx context.Context, ref SessionRef) (SessionEnd, error)
}
