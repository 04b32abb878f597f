// Package openapi holds the OpenAPI 3.1 description of the HTTP API
// (openapi.json, written by hand from the handlers: it states what they
// answer, streaming and idempotent retries included), embedded so that
// every server serves it at GET /v1/openapi.json and the tests of package
// httpapi check it against the server's real answers.
//
// The document comes in two parts. openapi.json is the base: what a server
// with sessions off serves, byte for byte, so that work on sessions cannot
// change the API of a server that does not offer them. sessions.json is the
// fragment that describes sessions (their paths, schemas, error codes and
// the fields they add to existing schemas); a server with sessions on
// serves the base merged with it (merge.go: the fragment only adds, it
// never changes what the base says).
//
// The committed files are the source; change them with the handlers.
// Their tests here lint both documents with @redocly/cli (test/openapi) and
// check the merge; the drift and validation tests live in package httpapi,
// next to the routes they walk, and run in both modes.
package openapi

import (
	_ "embed"
	"sync"
)

// document is openapi.json as committed: the base.
//
//go:embed openapi.json
var document []byte

// sessionsFragment is sessions.json as committed.
//
//go:embed sessions.json
var sessionsFragment []byte

// withSessions is the merged document, built the first time a server with
// sessions on asks: a server with them off never pays for the merge. The
// committed fragment merging cleanly is checked by this package's tests, so
// a failure here is a broken build, not a runtime condition.
var withSessions = sync.OnceValue(func() []byte {
	merged, err := merge(document, sessionsFragment)
	if err != nil {
		panic("openapi: sessions.json does not merge into openapi.json: " + err.Error())
	}
	return merged
})

// JSON returns the document a server serves: the base, byte for byte,
// when sessions is false, and the base merged with the sessions fragment
// when it is true. Each call returns a copy of its own: no caller can change
// what the server serves.
func JSON(sessions bool) []byte {
	if !sessions {
		return append([]byte(nil), document...)
	}
	return append([]byte(nil), withSessions()...)
}
