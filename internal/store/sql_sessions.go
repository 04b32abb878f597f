package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// What the store keeps of code sessions (package sessionrecord keeps the
// rows; the CLI and the console read them): one row per session, named by
// the SHA-256 of its id and never the id itself, so that the database (and
// anyone reading it) cannot use a session. A row is open until it is
// ended; an ended row is a tombstone, kept a day so that the owner's next
// use of the id hears why it ended (a server restart, the operator) rather
// than "not found".

// ErrCodeSessionNotFound is returned (wrapped) for an id hash that names
// no row (or, for RequestCodeSessionEnd, no open one).
var ErrCodeSessionNotFound = errors.New("no such session")

// MinSessionHashPrefix is the fewest hex digits of an id hash that
// RequestCodeSessionEnd takes, so that an operator's typo does not end a
// session by chance.
const MinSessionHashPrefix = 8

// CodeSession is one session's row.
type CodeSession struct {
	// IDHash is HashSessionID of the session's id.
	IDHash string
	// Owner is the key id of the caller that opened it ("" for a server
	// without keys).
	Owner string
	// Server names the engine or front end that keeps the row (its
	// sessions die with it when Worker is "").
	Server string
	// Worker is the cluster's worker that holds the session ("" on one
	// machine).
	Worker  string
	Runtime string
	Created time.Time
	// Expires is when the session ends if no call comes before, as last
	// known.
	Expires time.Time
	// Ended is zero while the session is open.
	Ended time.Time
	// EndReason is why it ended (an execapi.SessionEndReason).
	EndReason string
	// EndRequested says the operator asked that it end; the server that
	// holds it ends it (with the reason "operator").
	EndRequested bool
}

// Open reports whether the session has not ended.
func (c CodeSession) Open() bool { return c.Ended.IsZero() }

// HashSessionID is the hex SHA-256 of a session id: ids are 128 random
// bits, so a plain hash is enough.
func HashSessionID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

const codeSessionColumns = `id_hash, owner, server, worker, runtime, created_ms, expires_ms, ended_ms, end_reason, end_requested`

func scanCodeSession(sc scanner) (CodeSession, error) {
	var c CodeSession
	var created, expires int64
	var ended sql.NullInt64
	var requested int
	if err := sc.Scan(&c.IDHash, &c.Owner, &c.Server, &c.Worker, &c.Runtime, &created, &expires, &ended, &c.EndReason, &requested); err != nil {
		return CodeSession{}, err
	}
	c.Created, c.Expires = time.UnixMilli(created), time.UnixMilli(expires)
	if ended.Valid {
		c.Ended = time.UnixMilli(ended.Int64)
	}
	c.EndRequested = requested != 0
	return c, nil
}

// InsertCodeSession adds an open session's row.
func (s *Store) InsertCodeSession(ctx context.Context, c CodeSession) error {
	if c.IDHash == "" {
		return errors.New("insert session: no id hash")
	}
	_, err := s.db.exec(ctx, `INSERT INTO code_sessions (id_hash, owner, server, worker, runtime, created_ms, expires_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, c.IDHash, c.Owner, c.Server, c.Worker, c.Runtime, c.Created.UnixMilli(), c.Expires.UnixMilli())
	if err != nil {
		return fmt.Errorf("insert session: %w", err)
	}
	return nil
}

// CodeSession returns the row (open or a tombstone) of an id hash.
func (s *Store) CodeSession(ctx context.Context, idHash string) (CodeSession, error) {
	c, err := scanCodeSession(s.db.queryRow(ctx, `SELECT `+codeSessionColumns+` FROM code_sessions WHERE id_hash = ?`, idHash))
	if isNoRows(err) {
		return CodeSession{}, ErrCodeSessionNotFound
	}
	if err != nil {
		return CodeSession{}, fmt.Errorf("read session: %w", err)
	}
	return c, nil
}

// OpenCodeSessions lists the open sessions of owner, or of every owner
// when all is set, oldest first.
func (s *Store) OpenCodeSessions(ctx context.Context, owner string, all bool) ([]CodeSession, error) {
	if all {
		return s.listCodeSessions(ctx, `ended_ms IS NULL`)
	}
	return s.listCodeSessions(ctx, `ended_ms IS NULL AND owner = ?`, owner)
}

// EndRequestedCodeSessions lists the open sessions of server whose end
// the operator asked for.
func (s *Store) EndRequestedCodeSessions(ctx context.Context, server string) ([]CodeSession, error) {
	return s.listCodeSessions(ctx, `ended_ms IS NULL AND end_requested <> 0 AND server = ?`, server)
}

// EndRequestedWorkerCodeSessions lists the open sessions held by a
// cluster's workers (of any server) whose end the operator asked for:
// every front end reaches every worker, so any of them may end these,
// whether or not the front end that opened them still runs.
func (s *Store) EndRequestedWorkerCodeSessions(ctx context.Context) ([]CodeSession, error) {
	return s.listCodeSessions(ctx, `ended_ms IS NULL AND end_requested <> 0 AND worker <> ''`)
}

func (s *Store) listCodeSessions(ctx context.Context, where string, args ...any) ([]CodeSession, error) {
	rs, err := s.db.query(ctx, `SELECT `+codeSessionColumns+` FROM code_sessions WHERE `+where+` ORDER BY created_ms, id_hash`, args...)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rs.Close()
	var out []CodeSession
	for rs.Next() {
		c, err := scanCodeSession(rs)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		out = append(out, c)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// TouchCodeSession records an open session's new expiry (after a call).
func (s *Store) TouchCodeSession(ctx context.Context, idHash string, expires time.Time) error {
	if _, err := s.db.exec(ctx, `UPDATE code_sessions SET expires_ms = ? WHERE id_hash = ? AND ended_ms IS NULL`,
		expires.UnixMilli(), idHash); err != nil {
		return fmt.Errorf("touch session: %w", err)
	}
	return nil
}

// EndCodeSession marks an open session ended at at for reason, and
// reports whether it was open (a row ends once: its first reason stays).
func (s *Store) EndCodeSession(ctx context.Context, idHash, reason string, at time.Time) (bool, error) {
	n, err := s.db.exec(ctx, `UPDATE code_sessions SET ended_ms = ?, end_reason = ? WHERE id_hash = ? AND ended_ms IS NULL`,
		at.UnixMilli(), reason, idHash)
	if err != nil {
		return false, fmt.Errorf("end session: %w", err)
	}
	return n == 1, nil
}

// RequestCodeSessionEnd asks that the open session whose id hash starts
// with prefix (at least MinSessionHashPrefix hex digits, and naming one
// session) end: the server that holds it ends it at its next poll.
func (s *Store) RequestCodeSessionEnd(ctx context.Context, prefix string) (CodeSession, error) {
	prefix = strings.ToLower(prefix)
	if len(prefix) < MinSessionHashPrefix || len(prefix) > sha256.Size*2 || strings.Trim(prefix, "0123456789abcdef") != "" {
		return CodeSession{}, fmt.Errorf("%q is not a session's id hash: give at least %d of its hex digits, as the listing shows them", prefix, MinSessionHashPrefix)
	}
	var c CodeSession
	err := s.db.inTx(ctx, func(cn conn) error {
		rs, err := cn.query(ctx, `SELECT `+codeSessionColumns+` FROM code_sessions WHERE ended_ms IS NULL AND id_hash LIKE ?`+s.d.lockRow, prefix+"%")
		if err != nil {
			return fmt.Errorf("find session: %w", err)
		}
		var found []CodeSession
		for rs.Next() {
			c, err := scanCodeSession(rs)
			if err != nil {
				rs.Close()
				return fmt.Errorf("find session: %w", err)
			}
			found = append(found, c)
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return fmt.Errorf("find session: %w", err)
		}
		switch len(found) {
		case 0:
			return fmt.Errorf("%w open with the id hash %s", ErrCodeSessionNotFound, prefix)
		case 1:
		default:
			return fmt.Errorf("%d open sessions have an id hash that starts with %s: give more of its digits", len(found), prefix)
		}
		c = found[0]
		if _, err := cn.exec(ctx, `UPDATE code_sessions SET end_requested = 1 WHERE id_hash = ?`, c.IDHash); err != nil {
			return fmt.Errorf("request session end: %w", err)
		}
		c.EndRequested = true
		return nil
	})
	return c, err
}

// EndServerCodeSessions marks every open session of server held by
// worker ("" on one machine) ended at at for reason (a server's restart:
// its sessions died with it), and returns how many.
func (s *Store) EndServerCodeSessions(ctx context.Context, server, worker, reason string, at time.Time) (int64, error) {
	n, err := s.db.exec(ctx, `UPDATE code_sessions SET ended_ms = ?, end_reason = ? WHERE server = ? AND worker = ? AND ended_ms IS NULL`,
		at.UnixMilli(), reason, server, worker)
	if err != nil {
		return 0, fmt.Errorf("end the server's sessions: %w", err)
	}
	return n, nil
}

// PurgeCodeSessions deletes the tombstones of sessions ended before
// before, and returns how many.
func (s *Store) PurgeCodeSessions(ctx context.Context, before time.Time) (int64, error) {
	n, err := s.db.exec(ctx, `DELETE FROM code_sessions WHERE ended_ms IS NOT NULL AND ended_ms < ?`, before.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("purge sessions: %w", err)
	}
	return n, nil
}
