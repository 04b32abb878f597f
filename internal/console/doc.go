// Package console is ScratchRun's web console, served by `scratchrun serve`
// at /console when an operator token is configured: API keys (list, create,
// revoke, change limits), usage (runs per key over time, outcomes,
// durations, bytes, recent runs, CSV), what the server is doing now, the
// open code sessions when the server offers them (the store's rows; End
// asks through the row), and a playground that runs code through the same
// gate as the API.
//
// The pages are plain HTML, CSS and JavaScript embedded in the binary (no
// CDN, no build step); they talk to a small JSON API under /console/api.
// The operator signs in with the token (compared in constant time; API keys
// cannot sign in) and gets a server-side session behind an HttpOnly,
// SameSite=Strict cookie (Secure over TLS) that expires when idle and at a
// fixed age. Every state-changing request carries the session's CSRF token
// in a header (the sign-in form a double-submitted one), and every answer
// sends a Content-Security-Policy that allows only the console's own
// scripts and styles, and no framing.
//
// It must never show an API key's secret except once, to whoever created
// it; never let a request without a session read or change anything; never
// run code except through the service it is given (the HTTP gate, which
// applies admission and records the run under httpapi.ConsoleCaller); and
// never log the operator token, a key or a playground request's content.
package console
