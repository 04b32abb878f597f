package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// What idempotent retries keep (package httpapi's Idempotency-Key): one
// entry per caller and key, claimed before its run is admitted, so that of
// two requests with one key exactly one runs, however many front ends share
// the database. The store knows nothing of HTTP: an answer is a status, a
// content type and bytes.

// MaxIdempotentBody bounds the answer an entry keeps. The output caps bound
// a run's answer (at the engine's defaults a JSON result is at most about
// 25 MiB: two 1 MiB outputs escaped six bytes for one at worst, 10 MiB of
// files in base64); an answer past this bound is not kept, and the caller
// keeps another answer in its place (httpapi: a 409 saying the code ran).
const MaxIdempotentBody = 32 << 20

// Errors of idempotency entries.
var (
	// ErrIdempotencyNotFound is an entry that does not exist, has expired,
	// or is no longer running when it is finished or released.
	ErrIdempotencyNotFound = errors.New("no such idempotency entry")
	// ErrIdempotentBodyTooLarge is an answer longer than MaxIdempotentBody.
	ErrIdempotentBodyTooLarge = fmt.Errorf("the answer is larger than the %d MiB an idempotency entry keeps", MaxIdempotentBody>>20)
)

// Idempotency entries' states.
const (
	idemRunning = "running"
	idemDone    = "done"
)

// IdempotencyClaim is the first request with a key.
type IdempotencyClaim struct {
	// Caller scopes the key (an API key's ID; "" for a server without
	// keys): two callers never see each other's entries.
	Caller, Key string
	// BodyHash identifies the request (httpapi: the SHA-256 of its body),
	// so that a repeat with another request is told apart.
	BodyHash string
	// At is when the first request came; the entry expires at At+Window.
	At     time.Time
	Window time.Duration
}

// IdempotencyEntry is an entry: running, or done with its answer.
type IdempotencyEntry struct {
	Caller, Key, BodyHash string
	// Done says the answer is there; until then the first request runs
	// (or its server stopped before it could say).
	Done bool
	// Status, ContentType and Body are the answer of an entry done.
	Status      int
	ContentType string
	Body        []byte
	Created     time.Time
	Expires     time.Time
}

// ClaimIdempotency writes a running entry for c unless one is there
// (inserted if absent, in one statement: of concurrent claims exactly one
// wins), and returns the entry and whether this call wrote it. Expired
// entries, of any caller, are deleted first.
func (s *Store) ClaimIdempotency(ctx context.Context, c IdempotencyClaim) (IdempotencyEntry, bool, error) {
	expires := c.At.Add(c.Window)
	// An entry released between a claim's insert and its read is gone: the
	// claim is tried again, a bounded number of times (each retry means
	// another request's run was refused meanwhile).
	for range 5 {
		var e IdempotencyEntry
		claimed := false
		err := s.db.inTx(ctx, func(cn conn) error {
			if _, err := cn.exec(ctx, `DELETE FROM idempotency WHERE expires_ms < ?`, time.Now().UnixMilli()); err != nil {
				return fmt.Errorf("sweep idempotency entries: %w", err)
			}
			n, err := cn.exec(ctx, `INSERT INTO idempotency (caller, idem_key, body_hash, state, created_ms, expires_ms)
				VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (caller, idem_key) DO NOTHING`,
				c.Caller, c.Key, c.BodyHash, idemRunning, c.At.UnixMilli(), expires.UnixMilli())
			if err != nil {
				return fmt.Errorf("claim idempotency entry: %w", err)
			}
			if n == 1 {
				claimed = true
				e = IdempotencyEntry{Caller: c.Caller, Key: c.Key, BodyHash: c.BodyHash,
					Created: time.UnixMilli(c.At.UnixMilli()), Expires: time.UnixMilli(expires.UnixMilli())}
				return nil
			}
			e, err = queryIdempotency(ctx, cn, c.Caller, c.Key)
			return err
		})
		if errors.Is(err, ErrIdempotencyNotFound) {
			continue
		}
		return e, claimed, err
	}
	return IdempotencyEntry{}, false, errors.New("claim idempotency entry: the entry kept changing under the claim")
}

// IdempotencyEntry returns the unexpired entry of caller's key.
func (s *Store) IdempotencyEntry(ctx context.Context, caller, key string) (IdempotencyEntry, error) {
	return queryIdempotency(ctx, s.db, caller, key)
}

func queryIdempotency(ctx context.Context, c conn, caller, key string) (IdempotencyEntry, error) {
	e := IdempotencyEntry{Caller: caller, Key: key}
	var state string
	var created, expires int64
	err := c.queryRow(ctx, `SELECT body_hash, state, status, content_type, body, created_ms, expires_ms FROM idempotency
		WHERE caller = ? AND idem_key = ? AND expires_ms >= ?`, caller, key, time.Now().UnixMilli()).
		Scan(&e.BodyHash, &state, &e.Status, &e.ContentType, &e.Body, &created, &expires)
	if isNoRows(err) {
		return IdempotencyEntry{}, ErrIdempotencyNotFound
	}
	if err != nil {
		return IdempotencyEntry{}, fmt.Errorf("read idempotency entry: %w", err)
	}
	e.Done = state == idemDone
	e.Created, e.Expires = time.UnixMilli(created), time.UnixMilli(expires)
	return e, nil
}

// FinishIdempotency stores the answer of caller's running entry: from
// here on it is done. An answer past MaxIdempotentBody is refused
// (ErrIdempotentBodyTooLarge) and the entry left running.
func (s *Store) FinishIdempotency(ctx context.Context, caller, key string, status int, contentType string, body []byte) error {
	if len(body) > MaxIdempotentBody {
		return ErrIdempotentBodyTooLarge
	}
	if body == nil {
		body = []byte{}
	}
	n, err := s.db.exec(ctx, `UPDATE idempotency SET state = ?, status = ?, content_type = ?, body = ?
		WHERE caller = ? AND idem_key = ? AND state = ?`, idemDone, status, contentType, body, caller, key, idemRunning)
	if err != nil {
		return fmt.Errorf("store idempotent answer: %w", err)
	}
	if n != 1 {
		return ErrIdempotencyNotFound
	}
	return nil
}

// ReleaseIdempotency deletes caller's running entry: its request was
// refused before anything ran, so that a retry may run it.
func (s *Store) ReleaseIdempotency(ctx context.Context, caller, key string) error {
	n, err := s.db.exec(ctx, `DELETE FROM idempotency WHERE caller = ? AND idem_key = ? AND state = ?`, caller, key, idemRunning)
	if err != nil {
		return fmt.Errorf("release idempotency entry: %w", err)
	}
	if n != 1 {
		return ErrIdempotencyNotFound
	}
	return nil
}
