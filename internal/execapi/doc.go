// Package execapi is the one contract of ScratchRun: the request a caller sends,
// the result it gets back, the limits that bound a run, their validation, and the
// Executor interface that every front end (CLI, MCP, HTTP) holds.
//
// A result says how the run ended as data (Outcome, Facts) and in words
// (Note, written from the facts in one place, Result.Finish); a call refused
// before it ran is a *Refusal whose Error is the one wording every front end
// shows. Front ends read the data and never parse the words.
//
// It is the wire format of POST /v1/exec and of `scratchrun exec --request`, so
// its JSON field names never change without a version bump. It must never import
// a backend, a front end or anything that runs code: it only describes and checks.
package execapi
