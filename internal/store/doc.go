// Package store keeps ScratchRun's API keys, the state of their limits,
// the usage records and what the built-in OAuth authorization server must
// share between front ends (sql_oauth.go: clients, authorization requests,
// refresh tokens by hash, the signing key; opaque text to the store) and
// the entries of idempotent retries (sql_idempotency.go: claimed by one
// request of a key, then its answer as bytes), the rows of code sessions
// (sql_sessions.go: by the hash of the id, open or a tombstone for a day,
// and the operator's end requests) in
// one of two databases, behind one concrete type
// (Store): an embedded SQLite file (pure Go, modernc.org/sqlite; the
// single-machine default), in WAL mode so that servers and the `scratchrun
// keys` commands can use it at the same time, or a PostgreSQL database
// (pgx), which front ends on many machines share. Both run the same SQL
// over a dialect that supplies what differs, and one test suite runs
// against both. The package declares no interface of the whole store:
// each consumer declares the few methods it uses (a Limiter's Leases,
// httpapi.KeyStore, console.KeyStore), and its tests fake only those.
//
// A key's rate and concurrency hold across every process that shares the
// database: the rate is a token bucket (one row per key, updated in the
// transaction that admits a call), concurrency a set of leases that the
// process holding them renews (Limiter) and that expire when it stops, so a
// front end that dies cannot keep a key's slots.
//
// It must never store or return a key's secret: a key is shown once, when it
// is created, and only its SHA-256 hash is kept (keys are 256-bit random, so a
// plain hash is enough; no password-stretching is needed). It must never
// print a database password (Location). It knows nothing of HTTP or
// sandboxes.
package store
