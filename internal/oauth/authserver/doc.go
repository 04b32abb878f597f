// Package authserver is ScratchRun's built-in OAuth 2.1 authorization
// server, for a self-hoster with no identity provider who wants to add the
// server to an MCP client such as claude.ai: authorization code with PKCE
// (S256 only), clients by client ID metadata document or by RFC 7591
// dynamic registration, a consent page where a person proves they may use
// the server by pasting one of its API keys, short-lived JWT access tokens
// for the one resource (/mcp, RFC 8707) that act as that key, and rotating
// refresh tokens. Revoking the key ends its tokens at once: the Verifier
// and every refresh look the key up.
//
// The protocol is zitadel/oidc's op package: it parses and validates the
// requests, issues codes, mints and signs the tokens and serves the key
// set. What this package writes by hand is only what op lacks, each marked
// where it is: refusing plain or missing PKCE, the RFC 8707 resource,
// dynamic registration, client ID metadata documents (fetched by an
// SSRF-guarded client), the RFC 8414 metadata, the iss of RFC 9207 on the
// redirect, exact redirect-URI matching shown as an error page rather than
// a redirect, the consent page, and refresh-token rotation with reuse
// detection (in Storage, which *store.Store implements, so that every
// front end sharing the database agrees).
//
// It never logs a token, code, client secret or API key.
package authserver
