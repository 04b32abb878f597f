// Package execapi is the one contract of ScratchRun: the request a caller sends,
// the result it gets back, the limits that bound a run, their validation, and the
// Executor interface that every front end (CLI, MCP, HTTP) holds.
//
// A result says how the run ended as data (Outcome, Facts) and in words
// (Note, written from the facts in one place, Result.Finish); a call refused
// before it ran is a *Refusal whose Error is the one wording every front end
// shows. Front ends read the data and never parse the words.
//
// Sessions (session*.go) extend the contract for callers that ask to keep
// a sandbox across calls, when the operator turns them on: the request that
// opens one and its checks against a SessionPolicy, what describes one, a
// call's result in one (FinishInSession), the SessionService an executor
// that holds them implements, and their errors: one ErrSessionNotFound for
// every id that is not the caller's (so that an id reveals nothing), a
// *SessionEndedError with its reason for the owner, a *SessionLostError
// when a cluster's worker was lost with it.
//
// It is the wire format of POST /v1/exec and of `scratchrun exec --request`, so
// its JSON field names never change without a version bump. It must never import
// a backend, a front end or anything that runs code: it only describes and checks.
package execapi
