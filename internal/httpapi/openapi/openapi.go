// Package openapi holds the OpenAPI 3.1 description of the HTTP API
// (openapi.json, written by hand from the handlers: it states what they
// answer, streaming and idempotent retries included), embedded so that
// every server serves it at GET /v1/openapi.json and the tests of package
// httpapi check it against the server's real answers.
//
// The committed openapi.json is the source; change it with the handlers.
// Its tests here lint it with @redocly/cli (test/openapi) and check that it
// is valid JSON; the drift and validation tests live in package httpapi,
// next to the routes they walk.
package openapi

import _ "embed"

// document is openapi.json as committed.
//
//go:embed openapi.json
var document []byte

// JSON returns the document's bytes, a copy of their own: no caller can
// change what the server serves.
func JSON() []byte { return append([]byte(nil), document...) }
