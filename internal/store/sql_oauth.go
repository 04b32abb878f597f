package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// What the built-in OAuth authorization server (package oauth/authserver)
// keeps. The store holds its records as opaque text (JSON the server
// writes) beside the few columns it looks them up by: it knows nothing of
// OAuth. Codes and refresh tokens are kept only as hashes the server
// computes, so the database never holds one that could be presented.

// Errors of the OAuth records.
var (
	// ErrOAuthNotFound is a client, request, code or refresh token that
	// does not exist or has expired.
	ErrOAuthNotFound = errors.New("no such OAuth record")
	// ErrOAuthUsed is a code or refresh token presented a second time.
	ErrOAuthUsed = errors.New("OAuth code or refresh token already used")
	// ErrOAuthFull is a registration refused because the bound on
	// registered clients is reached.
	ErrOAuthFull = errors.New("too many OAuth clients registered")
)

// OAuthClient is a client registered by RFC 7591 dynamic registration.
type OAuthClient struct {
	ID string
	// Metadata is the client's registered metadata, as the server wrote it.
	Metadata string
	Created  time.Time
}

// OAuthAuthRequest is an authorization request, from /authorize to the
// exchange of its code.
type OAuthAuthRequest struct {
	ID string
	// Data is the request, as the server wrote it.
	Data string
	// Expires is when it (and its code) stops being usable.
	Expires time.Time
}

// OAuthRefresh is a refresh token, by the hash of its secret.
type OAuthRefresh struct {
	Hash string
	// Family is the grant the token belongs to: every token rotated from
	// one authorization shares it, so reuse of any of them ends them all.
	Family, KeyID, ClientID string
	// Data is the token request it renews, as the server wrote it.
	Data    string
	Expires time.Time
}

// OAuthSigningKey is the private key access tokens are signed with.
type OAuthSigningKey struct {
	ID, Algorithm string
	// PrivatePEM is the PKCS #8 private key, PEM-encoded.
	PrivatePEM string
	Created    time.Time
}

// OAuthClientIdle is how long a registered client is kept with no grant:
// anyone may register, so clients nobody signed in with are swept, and
// registration does not stay full once filled.
const OAuthClientIdle = 24 * time.Hour

// AddOAuthClient registers a client, unless max clients are registered.
// Clients older than OAuthClientIdle that hold no refresh token are
// deleted first.
func (s *Store) AddOAuthClient(ctx context.Context, c OAuthClient, max int) error {
	return s.db.inTx(ctx, func(cn conn) error {
		if _, err := cn.exec(ctx, `DELETE FROM oauth_clients WHERE created_ms < ?
			AND id NOT IN (SELECT client_id FROM oauth_refresh_tokens)`, c.Created.Add(-OAuthClientIdle).UnixMilli()); err != nil {
			return fmt.Errorf("sweep OAuth clients: %w", err)
		}
		var n int
		if err := cn.queryRow(ctx, `SELECT COUNT(*) FROM oauth_clients`).Scan(&n); err != nil {
			return fmt.Errorf("count OAuth clients: %w", err)
		}
		if n >= max {
			return ErrOAuthFull
		}
		if _, err := cn.exec(ctx, `INSERT INTO oauth_clients (id, metadata, created_ms) VALUES (?, ?, ?)`,
			c.ID, c.Metadata, c.Created.UnixMilli()); err != nil {
			return fmt.Errorf("store OAuth client: %w", err)
		}
		return nil
	})
}

// OAuthClient returns the registered client with this id.
func (s *Store) OAuthClient(ctx context.Context, id string) (OAuthClient, error) {
	var c OAuthClient
	var created int64
	err := s.db.queryRow(ctx, `SELECT id, metadata, created_ms FROM oauth_clients WHERE id = ?`, id).Scan(&c.ID, &c.Metadata, &created)
	if isNoRows(err) {
		return OAuthClient{}, ErrOAuthNotFound
	}
	if err != nil {
		return OAuthClient{}, fmt.Errorf("read OAuth client: %w", err)
	}
	c.Created = time.UnixMilli(created)
	return c, nil
}

// PutOAuthAuthRequest stores an authorization request, or replaces its
// data and expiry (keeping its code). Expired requests are deleted.
func (s *Store) PutOAuthAuthRequest(ctx context.Context, r OAuthAuthRequest) error {
	now := time.Now().UnixMilli()
	if _, err := s.db.exec(ctx, `DELETE FROM oauth_auth_requests WHERE expires_ms < ?`, now); err != nil {
		return fmt.Errorf("sweep OAuth requests: %w", err)
	}
	_, err := s.db.exec(ctx, `INSERT INTO oauth_auth_requests (id, data, expires_ms) VALUES (?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET data = excluded.data, expires_ms = excluded.expires_ms`,
		r.ID, r.Data, r.Expires.UnixMilli())
	if err != nil {
		return fmt.Errorf("store OAuth request: %w", err)
	}
	return nil
}

// CountOAuthAuthRequests is how many authorization requests are pending
// (unexpired), for the bound on what unauthenticated callers may store.
func (s *Store) CountOAuthAuthRequests(ctx context.Context) (int, error) {
	var n int
	if err := s.db.queryRow(ctx, `SELECT COUNT(*) FROM oauth_auth_requests WHERE expires_ms >= ?`, time.Now().UnixMilli()).Scan(&n); err != nil {
		return 0, fmt.Errorf("count OAuth requests: %w", err)
	}
	return n, nil
}

// OAuthAuthRequest returns the unexpired authorization request with this id.
func (s *Store) OAuthAuthRequest(ctx context.Context, id string) (OAuthAuthRequest, error) {
	return queryAuthRequest(ctx, s.db, `WHERE id = ? AND expires_ms >= ?`, id, time.Now().UnixMilli())
}

func queryAuthRequest(ctx context.Context, c conn, where string, args ...any) (OAuthAuthRequest, error) {
	var r OAuthAuthRequest
	var expires int64
	err := c.queryRow(ctx, `SELECT id, data, expires_ms FROM oauth_auth_requests `+where, args...).Scan(&r.ID, &r.Data, &expires)
	if isNoRows(err) {
		return OAuthAuthRequest{}, ErrOAuthNotFound
	}
	if err != nil {
		return OAuthAuthRequest{}, fmt.Errorf("read OAuth request: %w", err)
	}
	r.Expires = time.UnixMilli(expires)
	return r, nil
}

// SetOAuthCode gives the authorization request its code (by hash).
func (s *Store) SetOAuthCode(ctx context.Context, id, codeHash string) error {
	n, err := s.db.exec(ctx, `UPDATE oauth_auth_requests SET code_hash = ? WHERE id = ? AND code_hash IS NULL AND expires_ms >= ?`,
		codeHash, id, time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("store OAuth code: %w", err)
	}
	if n != 1 {
		return ErrOAuthNotFound
	}
	return nil
}

// TakeOAuthCode returns the authorization request whose code this is and
// marks the code used, in one step, so that two exchanges of one code
// cannot both succeed. A code used before is ErrOAuthUsed, returned with
// its request, so that the caller can end the grant it produced; the
// request is kept until it expires so that a replay is recognised.
func (s *Store) TakeOAuthCode(ctx context.Context, codeHash string) (OAuthAuthRequest, error) {
	var r OAuthAuthRequest
	err := s.db.inTx(ctx, func(c conn) error {
		var err error
		r, err = queryAuthRequest(ctx, c, `WHERE code_hash = ? AND expires_ms >= ?`+s.d.lockRow, codeHash, time.Now().UnixMilli())
		if err != nil {
			return err
		}
		n, err := c.exec(ctx, `UPDATE oauth_auth_requests SET code_used = 1 WHERE id = ? AND code_used = 0`, r.ID)
		if err != nil {
			return fmt.Errorf("mark OAuth code used: %w", err)
		}
		if n != 1 {
			return ErrOAuthUsed
		}
		return nil
	})
	return r, err
}

// DeleteOAuthAuthRequest deletes the authorization request with this id,
// unless its code was used: that row stays until it expires, so that a
// replay of the code is told from an unknown one.
func (s *Store) DeleteOAuthAuthRequest(ctx context.Context, id string) error {
	if _, err := s.db.exec(ctx, `DELETE FROM oauth_auth_requests WHERE id = ? AND code_used = 0`, id); err != nil {
		return fmt.Errorf("delete OAuth request: %w", err)
	}
	return nil
}

// AddOAuthRefresh stores a refresh token. Expired ones are deleted.
func (s *Store) AddOAuthRefresh(ctx context.Context, r OAuthRefresh) error {
	if _, err := s.db.exec(ctx, `DELETE FROM oauth_refresh_tokens WHERE expires_ms < ?`, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("sweep OAuth refresh tokens: %w", err)
	}
	// A family keeps its used tokens only for reuse detection, and only the
	// last few: a client that refreshes often does not grow the table.
	if _, err := s.db.exec(ctx, `DELETE FROM oauth_refresh_tokens WHERE family = ? AND used = 1 AND hash NOT IN
		(SELECT hash FROM oauth_refresh_tokens WHERE family = ? AND used = 1 ORDER BY expires_ms DESC LIMIT ?)`,
		r.Family, r.Family, usedRefreshKept); err != nil {
		return fmt.Errorf("sweep used OAuth refresh tokens: %w", err)
	}
	_, err := s.db.exec(ctx, `INSERT INTO oauth_refresh_tokens (hash, family, key_id, client_id, data, expires_ms) VALUES (?, ?, ?, ?, ?, ?)`,
		r.Hash, r.Family, r.KeyID, r.ClientID, r.Data, r.Expires.UnixMilli())
	if err != nil {
		return fmt.Errorf("store OAuth refresh token: %w", err)
	}
	return nil
}

// usedRefreshKept is how many used refresh tokens a family keeps, to tell
// a replay of a recent one (which ends the family) from a stranger's token.
const usedRefreshKept = 4

// OAuthRefresh returns the unused, unexpired refresh token with this hash.
func (s *Store) OAuthRefresh(ctx context.Context, hash string) (OAuthRefresh, error) {
	return queryRefresh(ctx, s.db, `WHERE hash = ? AND used = 0 AND expires_ms >= ?`, hash, time.Now().UnixMilli())
}

func queryRefresh(ctx context.Context, c conn, where string, args ...any) (OAuthRefresh, error) {
	var r OAuthRefresh
	var expires int64
	err := c.queryRow(ctx, `SELECT hash, family, key_id, client_id, data, expires_ms FROM oauth_refresh_tokens `+where, args...).
		Scan(&r.Hash, &r.Family, &r.KeyID, &r.ClientID, &r.Data, &expires)
	if isNoRows(err) {
		return OAuthRefresh{}, ErrOAuthNotFound
	}
	if err != nil {
		return OAuthRefresh{}, fmt.Errorf("read OAuth refresh token: %w", err)
	}
	r.Expires = time.UnixMilli(expires)
	return r, nil
}

// TakeOAuthRefresh returns the refresh token with this hash and marks it
// used, in one step (rotation: each token is good once). A token used
// before is ErrOAuthUsed, and its whole family is deleted with it, as
// OAuth 2.1 (section 4.3.1) asks of a reused refresh token: one of the two
// presenting it is not the client.
func (s *Store) TakeOAuthRefresh(ctx context.Context, hash string) (OAuthRefresh, error) {
	var r OAuthRefresh
	reused := false
	err := s.db.inTx(ctx, func(c conn) error {
		var err error
		r, err = queryRefresh(ctx, c, `WHERE hash = ? AND expires_ms >= ?`+s.d.lockRow, hash, time.Now().UnixMilli())
		if err != nil {
			return err
		}
		n, err := c.exec(ctx, `UPDATE oauth_refresh_tokens SET used = 1 WHERE hash = ? AND used = 0`, hash)
		if err != nil {
			return fmt.Errorf("mark OAuth refresh token used: %w", err)
		}
		if n == 1 {
			return nil
		}
		// The family's deletion must commit (inTx rolls back on an
		// error), so the reuse is reported after it.
		reused = true
		if _, err := c.exec(ctx, `DELETE FROM oauth_refresh_tokens WHERE family = ?`, r.Family); err != nil {
			return fmt.Errorf("revoke OAuth grant: %w", err)
		}
		return nil
	})
	if err == nil && reused {
		return OAuthRefresh{}, ErrOAuthUsed
	}
	return r, err
}

// RevokeOAuthGrant deletes every refresh token of a family.
func (s *Store) RevokeOAuthGrant(ctx context.Context, family string) error {
	if _, err := s.db.exec(ctx, `DELETE FROM oauth_refresh_tokens WHERE family = ?`, family); err != nil {
		return fmt.Errorf("revoke OAuth grant: %w", err)
	}
	return nil
}

// OAuthSigningKey returns the signing key, storing candidate first if the
// database has none: the first front end to start generates the key and
// every other one (and every restart) uses it.
func (s *Store) OAuthSigningKey(ctx context.Context, candidate OAuthSigningKey) (OAuthSigningKey, error) {
	_, err := s.db.exec(ctx, `INSERT INTO oauth_signing_keys (slot, kid, alg, private_pem, created_ms) VALUES ('current', ?, ?, ?, ?)
		ON CONFLICT (slot) DO NOTHING`, candidate.ID, candidate.Algorithm, candidate.PrivatePEM, candidate.Created.UnixMilli())
	if err != nil {
		return OAuthSigningKey{}, fmt.Errorf("store OAuth signing key: %w", err)
	}
	var k OAuthSigningKey
	var created int64
	err = s.db.queryRow(ctx, `SELECT kid, alg, private_pem, created_ms FROM oauth_signing_keys WHERE slot = 'current'`).
		Scan(&k.ID, &k.Algorithm, &k.PrivatePEM, &created)
	if err != nil {
		return OAuthSigningKey{}, fmt.Errorf("read OAuth signing key: %w", err)
	}
	k.Created = time.UnixMilli(created)
	return k, nil
}
