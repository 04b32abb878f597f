// Package mcpproxy joins two MCP connections message by message: what
// `scratchrun mcp` runs between a desktop client on stdio and a server's
// Streamable HTTP /mcp when it signs in with OAuth.
//
// It forwards at the transport level, JSON-RPC messages as they are, so
// the client sees exactly the server's tools, prompts, notifications and
// errors, and the proxy has nothing of its own to keep in step with the
// server. Two things it adds, because the SDK's client transport expects
// an mcp.Client above it and gets none here: a call whose HTTP request
// fails is answered with a JSON-RPC error (else the client would wait for
// ever), and requests after the handshake carry the negotiated
// MCP-Protocol-Version header (HTTPClient), which the transport only sets
// when its own ClientSession tells it the version.
//
// What a proxy at this level cannot do: open the standalone GET stream for
// server messages outside any request (also the SDK's ClientSession's
// job). ScratchRun's server sends nothing that way; its progress and
// logging ride on the call's own stream.
package mcpproxy
