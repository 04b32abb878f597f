package execapi

import (
	"bytes"
	"encoding/json"
	"time"
)

// A session is one sandbox that outlives a call: its files, processes and
// (for runtimes with a kernel) interpreter state persist from one call in
// it to the next, until it is closed, idle for its idle TTL, past its
// lifetime, or ended by the engine (memory, a lost sandbox, shutdown).
// Sessions are opt-in for the operator (SessionPolicy); a plain call
// (Request) always gets a fresh sandbox.

// SessionRequest opens a session (POST /v1/sessions).
type SessionRequest struct {
	// Runtime names a catalog entry, as Request's.
	Runtime string `json:"runtime"`
	// Limits hold for the whole session: MemoryMB caps all its processes
	// together for its life; TimeoutMS is each call's default timeout
	// (a call may ask for its own within the policy).
	Limits Limits `json:"limits"`
	// Network is the session's network mode for its life, as Request's.
	Network string `json:"network,omitempty"`
	// IdleTTLMS ends the session that long after its last call ended;
	// absent: the operator's default.
	IdleTTLMS int `json:"idle_ttl_ms,omitempty"`
	// MaxLifetimeMS ends the session that long after it opened, however
	// busy; absent: the operator's maximum.
	MaxLifetimeMS int `json:"max_lifetime_ms,omitempty"`
	// Env is the base environment of every call in the session; a call's
	// own Env is added over it.
	Env map[string]string `json:"env,omitempty"`
}

// UnmarshalJSON decodes a session request as the wire format has it: an
// explicit 0 for a duration is refused naming the field, as for Limits
// (only an absent field means the default).
func (r *SessionRequest) UnmarshalJSON(data []byte) error {
	type plain SessionRequest
	var wire struct {
		plain
		IdleTTLMS     *int `json:"idle_ttl_ms"`
		MaxLifetimeMS *int `json:"max_lifetime_ms"`
	}
	if string(bytes.TrimSpace(data)) == "null" {
		return nil
	}
	if err := json.Unmarshal(data, &wire); err != nil {
		return err
	}
	*r = SessionRequest(wire.plain)
	for _, d := range []struct {
		field string
		v     *int
		into  *int
	}{{"idle_ttl_ms", wire.IdleTTLMS, &r.IdleTTLMS}, {"max_lifetime_ms", wire.MaxLifetimeMS, &r.MaxLifetimeMS}} {
		if d.v == nil {
			continue
		}
		if *d.v == 0 {
			return ExplicitZero(d.field)
		}
		*d.into = *d.v
	}
	return nil
}

// Session states, as SessionInfo.State reports them.
const (
	// SessionIdle: open, no call running in it; its idle TTL runs.
	SessionIdle = "idle"
	// SessionRunning: a call (or a file operation) is in it now.
	SessionRunning = "running"
)

// Interpreter kinds of a session, as SessionInfo.Interpreter reports them.
const (
	// InterpreterPython and InterpreterNode keep a kernel: variables and
	// functions of one call are there in the next, and the value of a
	// last bare expression is shown as a REPL shows it.
	InterpreterPython = "python"
	InterpreterNode   = "node"
	// InterpreterBash runs each call in a fresh shell that keeps the
	// working directory and exported variables of the last.
	InterpreterBash = "bash"
	// InterpreterNone keeps files and processes only.
	InterpreterNone = "none"
)

// Fork kinds of a session, as SessionInfo.Fork reports them: what a fork
// of it copies on this isolation level.
const (
	// ForkMemory copies files and memory: the child's interpreter state
	// (variables, running processes) is the parent's at the fork.
	ForkMemory = "memory"
	// ForkFiles copies files only: the child's processes and interpreter
	// start afresh.
	ForkFiles = "files"
	// ForkNone: sessions on this level cannot be forked.
	ForkNone = "none"
)

// SessionInfo describes an open session to its owner (the open's answer,
// GET /v1/sessions).
type SessionInfo struct {
	// ID names the session in its routes: SessionIDPrefix and 26 base32
	// characters of 128 random bits, unguessable, and bound to the caller
	// that opened it (any other caller is told it does not exist).
	ID      string `json:"id"`
	Runtime string `json:"runtime"`
	Network string `json:"network"`
	// Limits are the session's: the memory for its whole life and each
	// call's default timeout.
	Limits        Limits    `json:"limits"`
	IdleTTLMS     int64     `json:"idle_ttl_ms"`
	MaxLifetimeMS int64     `json:"max_lifetime_ms"`
	CreatedAt     time.Time `json:"created_at"`
	LastUsedAt    time.Time `json:"last_used_at"`
	// ExpiresAt is when the session ends if no call comes before: the
	// sooner of the idle TTL's end and LifetimeEndsAt.
	ExpiresAt time.Time `json:"expires_at"`
	// LifetimeEndsAt is when the session ends however busy it is.
	LifetimeEndsAt time.Time `json:"lifetime_ends_at"`
	// State is SessionIdle or SessionRunning.
	State string `json:"state"`
	// MemoryBytes is what the session's sandbox used when described.
	MemoryBytes int64 `json:"memory_bytes"`
	// Interpreter is what of the interpreter persists (InterpreterPython
	// and so on).
	Interpreter string `json:"interpreter"`
	// Fork is what a fork of it copies (ForkMemory, ForkFiles, ForkNone).
	Fork string `json:"fork"`
	// ForkedFrom is the parent's id for a session made by a fork.
	ForkedFrom string `json:"forked_from,omitempty"`
	// Worker is the cluster's worker that holds the session, for the
	// front end's routing only: never on the wire, as Result.Worker.
	Worker string `json:"-"`
	// Owner is the caller (key id) that opened it: for the operator's
	// listing (SessionAdmin), never on a caller's wire.
	Owner string `json:"-"`
}

// Expiry is when a session with these times ends if nothing uses it: the
// sooner of its idle TTL's end after lastUsed and its lifetime's end.
func Expiry(lastUsed time.Time, idleTTL time.Duration, lifetimeEnds time.Time) time.Time {
	if idle := lastUsed.Add(idleTTL); idle.Before(lifetimeEnds) {
		return idle
	}
	return lifetimeEnds
}
