// Package store keeps ScratchRun's API keys and usage records in an embedded
// SQLite file (pure Go, modernc.org/sqlite), in WAL mode so that a running
// server and the `scratchrun keys` commands can use it at the same time.
//
// It must never store or return a key's secret: a key is shown once, when it
// is created, and only its SHA-256 hash is kept (keys are 256-bit random, so a
// plain hash is enough; no password-stretching is needed). It knows nothing of
// HTTP or sandboxes.
package store
