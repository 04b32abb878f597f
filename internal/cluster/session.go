package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Session operations travel as calls do (offer, parts, go, numbered
// answers): each is untrusted work that must happen at most once, and the
// protocol that guarantees it for calls guarantees it for them. An offer's
// HeaderOp says which operation its request is; none is a plain call.
const (
	OpSessionOpen  = "session_open"
	OpSessionExec  = "session_exec"
	OpSessionGet   = "session_file_get"
	OpSessionPut   = "session_file_put"
	OpSessionFork  = "session_fork"
	OpSessionList  = "session_list"
	OpSessionClose = "session_close"
	// OpSessionAll and OpSessionEnd are the operator's (SessionAdmin):
	// every caller's sessions. Only front ends may publish to a worker's
	// call subjects, so a worker takes them from any offer.
	OpSessionAll = "session_all"
	OpSessionEnd = "session_end"
	// OpSessionInfo looks one session up (SessionService.Session): one
	// worker asked, where a list asks them all.
	OpSessionInfo = "session_info"
)

// SessionOps are the operations a worker takes besides plain calls.
var SessionOps = []string{OpSessionOpen, OpSessionExec, OpSessionGet, OpSessionPut, OpSessionFork,
	OpSessionList, OpSessionClose, OpSessionAll, OpSessionEnd, OpSessionInfo}

// SessionOp is the request of a session operation (the offer's parts).
// Its Checked forms are the front end's, which the worker holds to its
// own engine's policy again before it runs anything.
type SessionOp struct {
	// Session is the session's id (every op but open, list and all).
	Session string `json:"session,omitempty"`
	// Open is an open's request.
	Open *execapi.CheckedSession `json:"open,omitempty"`
	// Exec is a call's request in the session.
	Exec *execapi.Checked `json:"exec,omitempty"`
	// Path and Data name and carry a file (get, put).
	Path string `json:"path,omitempty"`
	Data []byte `json:"data,omitempty"`
}

// SessionAnswer is the result of a session operation (the result's parts):
// the one field its op fills.
type SessionAnswer struct {
	Result *execapi.SessionResult `json:"result,omitempty"`
	Info   *execapi.SessionInfo   `json:"info,omitempty"`
	List   []SessionEntry         `json:"list,omitempty"`
	End    *execapi.SessionEnd    `json:"end,omitempty"`
	Data   []byte                 `json:"data,omitempty"`
}

// SessionEntry is a SessionInfo with its Owner, which SessionInfo keeps
// off every caller's wire: the operator's listing needs it.
type SessionEntry struct {
	execapi.SessionInfo
	Owner string `json:"owner,omitempty"`
}

// SessionFailure carries, in a Failure, the session errors of the
// contract, so that a front end returns them as the worker's engine gave
// them (ErrSessionNotFound, *SessionEndedError and so on).
type SessionFailure struct {
	// Code is the error's execapi code (CodeSessionNotFound, ...).
	Code string `json:"code"`
	// End is an ended session's end.
	End *execapi.SessionEnd `json:"end,omitempty"`
	// Path and Limit are a too large file's.
	Path  string `json:"path,omitempty"`
	Limit int64  `json:"limit,omitempty"`
}

// sessionFailureOf is the SessionFailure reporting err, or nil when err
// is no session error a worker passes on (a lost session is the front
// end's to say, never a worker's).
func sessionFailureOf(err error) *SessionFailure {
	code := execapi.SessionErrorCode(err)
	switch code {
	case "", execapi.CodeSessionLost, execapi.CodeSessionLimit:
		// A limit is a Refusal, which a Failure carries already.
		return nil
	}
	sf := &SessionFailure{Code: code}
	var ended *execapi.SessionEndedError
	var big *execapi.FileTooLargeError
	switch {
	case errors.As(err, &ended):
		end := ended.End
		sf.End = &end
	case errors.As(err, &big):
		sf.Path, sf.Limit = big.Path, big.Limit
	}
	return sf
}

// err is the contract's error sf reports; nil for a code it does not know.
func (sf *SessionFailure) err() error {
	switch sf.Code {
	case execapi.CodeSessionNotFound:
		return execapi.ErrSessionNotFound
	case execapi.CodeSessionEnded:
		if sf.End == nil {
			return nil
		}
		return &execapi.SessionEndedError{End: *sf.End}
	case execapi.CodeFileNotFound:
		return execapi.ErrSessionFileNotFound
	case execapi.CodeFileTooLarge:
		return &execapi.FileTooLargeError{Path: sf.Path, Limit: sf.Limit}
	case execapi.CodeForkUnsupported:
		return execapi.ErrForkUnsupported
	}
	return nil
}

// EndedSession is one session a worker ended on its own (draining), as
// its registration tells front ends, so that the session's next call is
// told how it ended rather than that it was lost. The id and its owner
// are hashed: the registry is readable by every front end, and an id is
// a caller's secret.
type EndedSession struct {
	IDHash     string                   `json:"id_hash"`
	CallerHash string                   `json:"caller_hash"`
	Reason     execapi.SessionEndReason `json:"reason"`
	At         time.Time                `json:"at"`
	Purged     bool                     `json:"state_purged"`
}

// MaxEndedSessions bounds Registration.EndedSessions, at the worker and at
// decode: a registration stays one small message.
const MaxEndedSessions = 256

// HashSessionID is the hash of a session id (or of its caller) that an
// EndedSession names.
func HashSessionID(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// sessionWorkerSep joins a worker's id and instance in SessionInfo.Worker:
// neither holds it (ValidateWorkerID; instances are nuids).
const sessionWorkerSep = "@"

// SessionWorker is what a front end puts in SessionInfo.Worker for a
// session on worker id's process instance: the row that routes the
// session's calls then also tells a restarted worker (which holds none of
// the sessions of its earlier process) from the one that opened it.
func SessionWorker(id, instance string) string {
	if instance == "" {
		return id
	}
	return id + sessionWorkerSep + instance
}

// ParseSessionWorker splits a SessionInfo.Worker; instance is "" when it
// names none.
func ParseSessionWorker(s string) (id, instance string) {
	id, instance, _ = strings.Cut(s, sessionWorkerSep)
	return id, instance
}
