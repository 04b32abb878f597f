package execapi

import (
	"errors"
	"fmt"
	"time"
)

// Error codes of sessions, shared by every front end (HTTP error
// documents, MCP tool errors, the CLI).
const (
	// CodeSessionNotFound: no session of this caller has the id (HTTP 404).
	CodeSessionNotFound = "session_not_found"
	// CodeSessionEnded: the caller's session has ended (HTTP 410).
	CodeSessionEnded = "session_ended"
	// CodeSessionLost: the session's worker was lost (HTTP 502).
	CodeSessionLost = "session_lost"
	// CodeSessionLimit: the caller has its maximum of sessions open
	// (HTTP 429).
	CodeSessionLimit = "session_limit"
	// CodeFileNotFound: the session has no regular file at the path (HTTP 404).
	CodeFileNotFound = "file_not_found"
	// CodeFileTooLarge: the session's file is bigger than a read returns (HTTP 413).
	CodeFileTooLarge = "file_too_large"
	// CodeForkUnsupported: the isolation level cannot fork sessions (HTTP 409).
	CodeForkUnsupported = "fork_unsupported"
	// CodeSessionCallNotStarted: the session could not start the call
	// (its code file could not be written: the session's space is full);
	// nothing ran and the session goes on (HTTP 409).
	CodeSessionCallNotStarted = "session_call_not_started"
)

// ErrSessionNotFound is the one error for an id that names no session of
// the caller: one never made, one of another caller, one ended so long ago
// that nothing of it is remembered. They read alike so that an id tells a
// caller nothing of sessions not its own (never "forbidden").
var ErrSessionNotFound = errors.New("no such session: the id is unknown, or its session ended long ago; open a new session")

// ErrSessionFileNotFound is ReadSessionFile's answer when the session has
// no regular file at the path (HTTP 404, code file_not_found).
var ErrSessionFileNotFound = errors.New("the session has no regular file at this path")

// ErrForkUnsupported is ForkSession's answer on an isolation level whose
// sessions cannot be copied (HTTP 409, code fork_unsupported).
var ErrForkUnsupported = errors.New("sessions on this isolation level cannot be forked")

// FileTooLargeError is ReadSessionFile's answer for a file bigger than the
// policy lets a read return (HTTP 413, code file_too_large).
type FileTooLargeError struct {
	Path  string
	Limit int64
}

func (e *FileTooLargeError) Error() string {
	return fmt.Sprintf("the file %s is larger than %d bytes, the most a read returns", e.Path, e.Limit)
}

// CallNotStartedError is ExecInSession's answer when the session's
// sandbox could not start the call (most often: its code file could not
// be written because what the session keeps fills its space). Nothing of
// the call ran; the session goes on, so the caller can free space.
type CallNotStartedError struct {
	// Reason is the sandbox's, e.g. "/code/call-3-x.py: No space left on device".
	Reason string
}

func (e *CallNotStartedError) Error() string {
	return "the call did not start in the session (" + e.Reason + "); nothing of it ran and the session goes on: " +
		"free the space its files hold (write an empty file over a large one with the files route) or close it"
}

// ErrSessionLimit is what a Refusal for RefusedKeySessions unwraps to.
var ErrSessionLimit = errors.New("this API key has its maximum of sessions open")

// SessionEndReason says why a session ended.
type SessionEndReason string

// Reasons a session ends.
const (
	// EndDeleted: its owner closed it.
	EndDeleted SessionEndReason = "deleted"
	// EndIdleTTL: no call came within its idle TTL.
	EndIdleTTL SessionEndReason = "idle_ttl"
	// EndMaxLifetime: it reached its lifetime.
	EndMaxLifetime SessionEndReason = "max_lifetime"
	// EndMemoryLimit: its processes reached its memory limit and were
	// killed (the call then running got exit code 137).
	EndMemoryLimit SessionEndReason = "memory_limit"
	// EndMemoryPressure: it was idle while the machine was short of
	// memory for other calls, and was ended to free its memory.
	EndMemoryPressure SessionEndReason = "memory_pressure"
	// EndTimeoutUnseparable: a call timed out and its processes could not
	// be killed apart from the session's.
	EndTimeoutUnseparable SessionEndReason = "timeout_unseparable"
	// EndSandboxLost: its sandbox stopped (its init or machine died).
	EndSandboxLost SessionEndReason = "sandbox_lost"
	// EndOperator: the operator ended it.
	EndOperator SessionEndReason = "operator"
	// EndServerShutdown: the server (or worker) that held it stopped or
	// drained.
	EndServerShutdown SessionEndReason = "server_shutdown"
	// EndServerRestart: the server restarted; sessions do not survive a
	// restart.
	EndServerRestart SessionEndReason = "server_restart"
)

// sentence is the reason in words, for errors and notes.
func (r SessionEndReason) sentence() string {
	switch r {
	case EndDeleted:
		return "it was closed"
	case EndIdleTTL:
		return "no call came within its idle TTL"
	case EndMaxLifetime:
		return "it reached its maximum lifetime"
	case EndMemoryLimit:
		return "its processes reached its memory limit and were killed"
	case EndMemoryPressure:
		return "it was ended while idle to free memory for other calls (the machine was short of memory)"
	case EndTimeoutUnseparable:
		return "a call timed out and its processes could not be killed apart from the session's"
	case EndSandboxLost:
		return "its sandbox stopped"
	case EndOperator:
		return "the operator ended it"
	case EndServerShutdown:
		return "the server that held it shut down"
	case EndServerRestart:
		return "the server restarted, and sessions do not survive a restart"
	}
	return fmt.Sprintf("it ended (%s)", string(r))
}

// SessionEnd is how and when a session ended.
type SessionEnd struct {
	Reason SessionEndReason `json:"reason"`
	At     time.Time        `json:"at"`
	// StatePurged is true when the teardown of its sandbox was verified,
	// as a call's Result says it.
	StatePurged bool `json:"state_purged"`
}

// SessionEndedError is the error of a use of a session that has ended, for
// its owner only (anyone else gets ErrSessionNotFound): what ended it and
// when, so that a caller knows its state is gone rather than meet a fresh
// session by surprise.
type SessionEndedError struct {
	End SessionEnd
}

// Error is the one wording of an ended session.
func (e *SessionEndedError) Error() string {
	return fmt.Sprintf("the session has ended: %s (at %s); its files and state are gone. Open a new session",
		e.End.Reason.sentence(), e.End.At.UTC().Format(time.RFC3339))
}

// SessionLostError is the error of a use of a session whose worker of a
// cluster was lost: the session is gone with it, and no new session stands
// in for it in silence.
type SessionLostError struct {
	// Worker is the lost worker's id, for logs (Detail), never shown.
	Worker string
	// Why says how it was seen to be lost, for logs.
	Why string
	// MayHaveRun is true when a call was in flight in the session as the
	// worker was lost: its code may have run, in part or in full.
	MayHaveRun bool
}

// Error is the one wording of a lost session.
func (e *SessionLostError) Error() string {
	if e.MayHaveRun {
		return "the session was lost with its worker while the call ran; the code may have run. Its files and state are gone: open a new session"
	}
	return "the session was lost with its worker; its files and state are gone, and the call did not run. Open a new session"
}

// Detail says which worker was lost and how, for logs.
func (e *SessionLostError) Detail() string {
	return fmt.Sprintf("session lost with worker %s: %s", e.Worker, e.Why)
}

// SessionErrorCode is the API error code of a session error (err may wrap one), or ""
// when err is none of them.
func SessionErrorCode(err error) string {
	var ended *SessionEndedError
	var lost *SessionLostError
	switch {
	case errors.Is(err, ErrSessionNotFound):
		return CodeSessionNotFound
	case errors.As(err, &ended):
		return CodeSessionEnded
	case errors.As(err, &lost):
		return CodeSessionLost
	case errors.Is(err, ErrSessionLimit):
		return CodeSessionLimit
	case errors.Is(err, ErrSessionFileNotFound):
		return CodeFileNotFound
	case errors.As(err, new(*FileTooLargeError)):
		return CodeFileTooLarge
	case errors.Is(err, ErrForkUnsupported):
		return CodeForkUnsupported
	case errors.As(err, new(*CallNotStartedError)):
		return CodeSessionCallNotStarted
	}
	return ""
}
