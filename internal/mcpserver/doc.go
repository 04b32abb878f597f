// Package mcpserver exposes an execapi.Service as the MCP tool
// `scratchrun_exec`, on the official MCP Go SDK: the tool's schema and
// description are built from what the service says it offers (its runtimes,
// limits and network policy), a call becomes one execapi.Request, and the
// Result becomes content a model can read (a text block, images, text files,
// binary resources) plus structuredContent, kept within what common MCP
// clients accept.
//
// When the Service is an execapi.SessionService whose operator turned
// sessions on (SessionPolicy().Enabled), it also offers the code-session
// tools scratchrun_session_open, scratchrun_session_run and
// scratchrun_session_close (session_*.go): separate tools rather than an
// argument of scratchrun_exec, whose schema and promise of a fresh sandbox
// per call stay byte for byte; with sessions off the offer is what it was
// before sessions existed. "Code sessions" (sandboxes kept across calls,
// bound to the caller's key) are not the MCP transport sessions bounded
// below.
//
// Over Streamable HTTP (HTTPHandler) it bounds sessions, which the SDK does
// not: per caller, in all and in idle time, and through the Service when it
// is a SessionAdmitter (the HTTP server's gate spends a run of the key's
// rate on each), refusing one more with 429 or 503 and a JSON-RPC error
// that names the limit.
//
// It is a thin adapter: it never runs code itself, never knows whether the
// Service is the local engine or a remote server, never validates requests
// beyond the shape of the tool's arguments (the Service does that and names
// the field; the session tools hold requests to the Service's own Policy and
// SessionPolicy, as the session contract takes checked requests), and never
// logs request code, env values or credentials.
package mcpserver
