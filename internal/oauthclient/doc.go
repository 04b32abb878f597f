// Package oauthclient signs `scratchrun mcp` in to a ScratchRun server's /mcp
// with OAuth 2.1, as the MCP authorization specification (2025-11-25, and
// the 2026-07-28 changes that concern clients) asks of a desktop client.
//
// The protocol itself (protected-resource and authorization-server
// discovery, PKCE S256, the RFC 8707 resource on both requests, RFC 9207
// iss, dynamic registration as a native client, client ID metadata
// documents) is the go-sdk's auth.AuthorizationCodeHandler. This package
// adds what the SDK leaves to the application:
//
//   - the browser sign-in (signin.go, callback.go, browser.go): a loopback
//     listener on 127.0.0.1 that exists only while a sign-in waits, the
//     authorization URL opened with the OS's opener and printed on stderr
//     (stdout is the MCP stream) as the stable line
//     "scratchrun mcp: sign in at URL", a bounded wait, state and iss
//     checked before anything is handed on;
//   - keeping the grant (store*.go): the refresh token, the client
//     registration and the issuer, one entry per resource that is valid for
//     one issuer only, in the OS keychain or in a file only the user can
//     read; rotated refresh tokens are saved as they arrive;
//   - Handler (handler.go), the auth.OAuthHandler the Streamable HTTP
//     transport calls: it starts from the stored grant (no browser), refreshes
//     once when the server refuses an access token it still thought good, and
//     only then signs in again.
//
// The access token only ever lives in memory.
package oauthclient
