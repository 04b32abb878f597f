// Package golden pins answers the project serves to committed files, byte
// for byte, so that work on one feature cannot change by accident what a
// server without it answers (issue 28: with sessions off, the API, the MCP
// tool list and scratchrun_exec's schema stay exactly as they are).
//
// JSON compares an answer with its file; `go test -run NAME -update`
// rewrites the files from what the server now answers, for a change that is
// meant (review the diff). MCPOffer reads what an MCP server offers over
// Streamable HTTP, as the bytes it sends.
package golden
