package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"time"
)

// KeyPrefix starts every key, as the hosted service's keys do.
const KeyPrefix = "sr_live_"

// keyRandomBytes is the entropy of a key's secret part.
const keyRandomBytes = 32

// displayPrefixLen is how much of a key is kept for display (KeyPrefix plus a
// few characters): enough for a person to tell keys apart, far too little to
// guess the rest.
const displayPrefixLen = len(KeyPrefix) + 4

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// Key is an API key as stored: everything but its secret.
type Key struct {
	ID string
	// Name is the operator's label; unique among keys that are not revoked.
	Name string
	// Prefix is the start of the secret, for display ("sr_live_Ab3x").
	Prefix string
	// RatePerMin is how many runs the key may start per minute.
	RatePerMin int
	// Concurrency is how many of the key's requests may be in flight at once.
	Concurrency int
	Created     time.Time
	// Revoked is the zero time while the key is active.
	Revoked time.Time
}

// Active reports whether the key has not been revoked.
func (k Key) Active() bool { return k.Revoked.IsZero() }

// NewKey is what CreateKey needs.
type NewKey struct {
	Name        string
	RatePerMin  int
	Concurrency int
}

// CreateKey makes a new key and returns it with its secret, which is never
// stored and cannot be shown again.
func (s *Store) CreateKey(ctx context.Context, nk NewKey) (Key, string, error) {
	if !namePattern.MatchString(nk.Name) {
		return Key{}, "", fmt.Errorf("name %q: use 1 to 64 letters, digits, '.', '_', '@' or '-', starting with a letter or digit", nk.Name)
	}
	if nk.RatePerMin <= 0 {
		return Key{}, "", fmt.Errorf("rate %d/min: must be positive", nk.RatePerMin)
	}
	if nk.Concurrency <= 0 {
		return Key{}, "", fmt.Errorf("concurrency %d: must be positive", nk.Concurrency)
	}
	secret, err := newSecret()
	if err != nil {
		return Key{}, "", err
	}
	idBytes := make([]byte, 6)
	if _, err := rand.Read(idBytes); err != nil {
		return Key{}, "", fmt.Errorf("create key id: %w", err)
	}
	k := Key{
		ID: "key_" + hex.EncodeToString(idBytes), Name: nk.Name, Prefix: secret[:displayPrefixLen],
		RatePerMin: nk.RatePerMin, Concurrency: nk.Concurrency, Created: time.Now().Truncate(time.Millisecond),
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO keys (id, name, hash, prefix, rate_per_min, concurrency, created_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, k.ID, k.Name, hashSecret(secret), k.Prefix, k.RatePerMin, k.Concurrency, k.Created.UnixMilli())
	if err != nil {
		if strings.Contains(err.Error(), "UNIQUE") && strings.Contains(err.Error(), "name") {
			return Key{}, "", fmt.Errorf("name %q: an active key already has it (revoke it first, or pick another)", nk.Name)
		}
		return Key{}, "", fmt.Errorf("store key: %w", err)
	}
	return k, secret, nil
}

// newSecret returns KeyPrefix and 32 random bytes in base62 (43 characters).
func newSecret() (string, error) {
	b := make([]byte, keyRandomBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("create key: %w", err)
	}
	s := new(big.Int).SetBytes(b).Text(62)
	// Fixed width, so every key has the same shape.
	const width = 43 // ceil(256 / log2(62))
	return KeyPrefix + strings.Repeat("0", width-len(s)) + s, nil
}

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Authenticate returns the active key whose secret this is. Any failure to
// match (malformed, unknown, revoked) is ErrNotFound, so callers cannot tell
// them apart and neither can their clients.
func (s *Store) Authenticate(ctx context.Context, secret string) (Key, error) {
	if !strings.HasPrefix(secret, KeyPrefix) || len(secret) > 128 {
		return Key{}, ErrNotFound
	}
	k, err := s.queryKey(ctx, `WHERE hash = ? AND revoked_ms IS NULL`, hashSecret(secret))
	if errors.Is(err, ErrNotFound) {
		return Key{}, ErrNotFound
	}
	return k, err
}

// KeyByID returns the key with this id, revoked or not.
func (s *Store) KeyByID(ctx context.Context, id string) (Key, error) {
	return s.queryKey(ctx, `WHERE id = ?`, id)
}

// ActiveKey returns the active key with this id or, failing that, this name.
func (s *Store) ActiveKey(ctx context.Context, idOrName string) (Key, error) {
	k, err := s.queryKey(ctx, `WHERE id = ? AND revoked_ms IS NULL`, idOrName)
	if errors.Is(err, ErrNotFound) {
		k, err = s.queryKey(ctx, `WHERE name = ? AND revoked_ms IS NULL`, idOrName)
	}
	if errors.Is(err, ErrNotFound) {
		return Key{}, fmt.Errorf("%q: %w (or it is revoked)", idOrName, ErrNotFound)
	}
	return k, err
}

// Revoke revokes the active key with this id or name, at once: the next
// request that presents it is refused.
func (s *Store) Revoke(ctx context.Context, idOrName string) (Key, error) {
	k, err := s.ActiveKey(ctx, idOrName)
	if err != nil {
		return Key{}, err
	}
	now := time.Now().Truncate(time.Millisecond)
	res, err := s.db.ExecContext(ctx, `UPDATE keys SET revoked_ms = ? WHERE id = ? AND revoked_ms IS NULL`, now.UnixMilli(), k.ID)
	if err != nil {
		return Key{}, fmt.Errorf("revoke %s: %w", k.ID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return Key{}, fmt.Errorf("revoke %s: %w (revoked meanwhile)", k.ID, ErrNotFound)
	}
	k.Revoked = now
	return k, nil
}

// ListKeys returns every key, oldest first.
func (s *Store) ListKeys(ctx context.Context) ([]Key, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+keyColumns+` FROM keys ORDER BY created_ms, id`)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	var out []Key
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list keys: %w", err)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// HasKeys reports whether any key was ever created (revoked ones count: a
// server whose keys were all revoked must stay closed, not fall open).
func (s *Store) HasKeys(ctx context.Context) (bool, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM keys LIMIT 1)`).Scan(&n); err != nil {
		return false, fmt.Errorf("count keys: %w", err)
	}
	return n > 0, nil
}

const keyColumns = `id, name, prefix, rate_per_min, concurrency, created_ms, revoked_ms`

type scanner interface{ Scan(dest ...any) error }

func scanKey(r scanner) (Key, error) {
	var k Key
	var created int64
	var revoked sql.NullInt64
	if err := r.Scan(&k.ID, &k.Name, &k.Prefix, &k.RatePerMin, &k.Concurrency, &created, &revoked); err != nil {
		return Key{}, err
	}
	k.Created = time.UnixMilli(created)
	if revoked.Valid {
		k.Revoked = time.UnixMilli(revoked.Int64)
	}
	return k, nil
}

func (s *Store) queryKey(ctx context.Context, where string, arg any) (Key, error) {
	k, err := scanKey(s.db.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM keys `+where, arg))
	if isNoRows(err) {
		return Key{}, ErrNotFound
	}
	if err != nil {
		return Key{}, fmt.Errorf("look up key: %w", err)
	}
	return k, nil
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
