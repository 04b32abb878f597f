// Package oauth is what ScratchRun's /mcp needs of OAuth 2.1 as a resource
// server (the MCP authorization specification, 2025-11-25): the facts a
// token carries once checked (Grant), the one interface every way of checking
// tokens meets (Verifier), and the protected-resource metadata and
// WWW-Authenticate challenge that let a client find where to get a token
// (RFC 9728).
//
// It knows nothing of HTTP servers or key stores. Where tokens come from is
// a leaf package each: an authorization server the operator already runs
// (package oauth/external) or the built-in one (package oauth/authserver).
// httpapi turns a Grant into the ScratchRun key it acts as, so a token is
// held to that key's rate, concurrency and usage, and revoking the key ends
// its tokens.
package oauth
