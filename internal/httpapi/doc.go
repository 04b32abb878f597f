// Package httpapi is ScratchRun's REST front end.
//
// The server (New, Server.Serve) speaks the contract of package execapi over
// HTTP: POST /v1/exec, GET /v1/runtimes, /healthz, /readyz and /metrics, with
// bearer API keys from package store, per-key rate and concurrency limits
// (kept in the key store, so that servers sharing it hold them together),
// the engine's refusals (its admission decides when a call may start)
// rendered with honest Retry-After answers, usage accounting and graceful
// draining. A call that asks for text/event-stream gets its run as
// server-sent events (stream.go): nothing until the run is admitted, so
// that refusals keep their answers, then its output as it is written and
// the result, through a bounded queue that never blocks the run. A call
// with an Idempotency-Key (idempotency.go) runs at most once per caller and
// key: its entry is claimed in the key store before the run, the run is
// detached from its client, and its answer is kept for 24 h and replayed
// to every repeat, on whichever front end shares the store. A call's
// errors are answered in one place (AnswerError: status,
// error document, Retry-After), which the web console's playground uses
// too. The MCP front end is mounted at /mcp behind the same keys and
// limits. Every
// connection is bounded in time and number (NewBoundedServer, shared with
// `scratchrun mcp --http`), and every route refuses what a web page could
// send (GuardOrigin). The API's OpenAPI document (package openapi) is
// served at GET /v1/openapi.json: the committed base byte for byte, or,
// with Config.Sessions, the base merged with the sessions fragment. Every
// route is registered through one table (routeTable), and the tests check
// the document against that table, the error code constants, the JSON
// fields and the real answers, in both modes; golden files pin what a
// server without sessions answers (TestAPIUnchangedWithoutSessions).
//
// With Config.Sessions (over a service that is an execapi.SessionService)
// the session routes join (sessions.go): open, list, a call in a session
// (/v1/exec's request and streaming), its files both ways as raw bytes,
// fork and close. They go through the gate's session methods
// (sessions_gate.go), which the server's Service offers to the MCP front
// end too: a call in a session is a run of the key's (rate, concurrency,
// a usage row), an open, fork or file operation spends a token of its
// rate. An id not the caller's, of whatever kind, gets one 404 body;
// session errors have their statuses in sessionAnswer. Idempotency-Key
// entries of these routes are bound to the route as well as the body.
//
// Its Go client is the public package client (repository root), which
// this package never imports: the wire types both use live in execapi.
//
// This package must never run code itself (it holds an execapi.Service), never
// let a request that failed decoding or validation reach that service, never
// let a key exceed its limits, and never log or echo an API key or a
// request's env values.
package httpapi
