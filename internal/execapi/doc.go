// Package execapi is the one contract of ScratchRun: the request a caller sends,
// the result it gets back, the limits that bound a run, their validation, and the
// Executor interface that every front end (CLI, MCP, HTTP) holds.
//
// It is the wire format of POST /v1/exec and of `scratchrun exec --request`, so
// its JSON field names never change without a version bump. It must never import
// a backend, a front end or anything that runs code: it only describes and checks.
package execapi
