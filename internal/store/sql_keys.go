package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// CreateKey makes a new key and returns it with its secret, which is
// never stored and cannot be shown again.
func (s *Store) CreateKey(ctx context.Context, nk NewKey) (Key, string, error) {
	if err := nk.check(); err != nil {
		return Key{}, "", err
	}
	secret, err := newSecret()
	if err != nil {
		return Key{}, "", err
	}
	id, err := newKeyID()
	if err != nil {
		return Key{}, "", err
	}
	k := Key{
		ID: id, Name: nk.Name, Prefix: secret[:displayPrefixLen],
		RatePerMin: nk.RatePerMin, Concurrency: nk.Concurrency, Created: time.Now().Truncate(time.Millisecond),
	}
	_, err = s.db.exec(ctx, `INSERT INTO keys (id, name, hash, prefix, rate_per_min, concurrency, created_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, k.ID, k.Name, hashSecret(secret), k.Prefix, k.RatePerMin, k.Concurrency, k.Created.UnixMilli())
	if err != nil {
		if s.d.isUniqueName(err) {
			return Key{}, "", &KeyFieldError{Field: FieldName, Value: fmt.Sprintf("%q", nk.Name), Problem: "an active key already has it (revoke it first, or pick another)"}
		}
		return Key{}, "", fmt.Errorf("store key: %w", err)
	}
	return k, secret, nil
}

// Authenticate returns the active key whose secret this is. Any failure
// to match (malformed, unknown, revoked) is ErrNotFound, so callers
// cannot tell them apart and neither can their clients.
func (s *Store) Authenticate(ctx context.Context, secret string) (Key, error) {
	if !plausibleSecret(secret) {
		return Key{}, ErrNotFound
	}
	k, err := queryKey(ctx, s.db, `WHERE hash = ? AND revoked_ms IS NULL`, hashSecret(secret))
	if errors.Is(err, ErrNotFound) {
		return Key{}, ErrNotFound
	}
	return k, err
}

// KeyByID returns the key with this id, revoked or not.
func (s *Store) KeyByID(ctx context.Context, id string) (Key, error) {
	return queryKey(ctx, s.db, `WHERE id = ?`, id)
}

// ActiveKey returns the active key with this id or, failing that, this
// name.
func (s *Store) ActiveKey(ctx context.Context, idOrName string) (Key, error) {
	return activeKey(ctx, s.db, idOrName, "")
}

// activeKey finds the active key with this id or name; lock, when not
// empty, locks its row for the rest of the transaction.
func activeKey(ctx context.Context, c conn, idOrName, lock string) (Key, error) {
	k, err := queryKey(ctx, c, `WHERE id = ? AND revoked_ms IS NULL`+lock, idOrName)
	if errors.Is(err, ErrNotFound) {
		k, err = queryKey(ctx, c, `WHERE name = ? AND revoked_ms IS NULL`+lock, idOrName)
	}
	if errors.Is(err, ErrNotFound) {
		return Key{}, fmt.Errorf("%q: %w (or it is revoked)", idOrName, ErrNotFound)
	}
	return k, err
}

// Revoke revokes the active key with this id or name, at once: the next
// request that presents it is refused, by every front end.
func (s *Store) Revoke(ctx context.Context, idOrName string) (Key, error) {
	var k Key
	err := s.db.inTx(ctx, func(c conn) error {
		var err error
		if k, err = activeKey(ctx, c, idOrName, s.d.lockRow); err != nil {
			return err
		}
		k.Revoked = time.Now().Truncate(time.Millisecond)
		n, err := c.exec(ctx, `UPDATE keys SET revoked_ms = ? WHERE id = ? AND revoked_ms IS NULL`, k.Revoked.UnixMilli(), k.ID)
		if err != nil {
			return fmt.Errorf("revoke %s: %w", k.ID, err)
		}
		if n != 1 {
			return fmt.Errorf("revoke %s: %w (revoked meanwhile)", k.ID, ErrNotFound)
		}
		// Its slots and bucket mean nothing any more.
		if _, err := c.exec(ctx, `DELETE FROM leases WHERE key_id = ?`, k.ID); err != nil {
			return fmt.Errorf("revoke %s: %w", k.ID, err)
		}
		if _, err := c.exec(ctx, `DELETE FROM rate_buckets WHERE key_id = ?`, k.ID); err != nil {
			return fmt.Errorf("revoke %s: %w", k.ID, err)
		}
		return nil
	})
	if err != nil {
		return Key{}, err
	}
	return k, nil
}

// SetLimits changes the limits of the active key with this id or name;
// a zero field keeps its value. Calls admitted already keep running.
func (s *Store) SetLimits(ctx context.Context, idOrName string, change LimitChange) (Key, error) {
	if err := change.check(false); err != nil {
		return Key{}, err
	}
	var k Key
	err := s.db.inTx(ctx, func(c conn) error {
		var err error
		if k, err = activeKey(ctx, c, idOrName, s.d.lockRow); err != nil {
			return err
		}
		if change.RatePerMin > 0 {
			k.RatePerMin = change.RatePerMin
		}
		if change.Concurrency > 0 {
			k.Concurrency = change.Concurrency
		}
		if _, err := c.exec(ctx, `UPDATE keys SET rate_per_min = ?, concurrency = ? WHERE id = ?`, k.RatePerMin, k.Concurrency, k.ID); err != nil {
			return fmt.Errorf("set limits of %s: %w", k.ID, err)
		}
		return nil
	})
	if err != nil {
		return Key{}, err
	}
	return k, nil
}

// ListKeys returns every key, oldest first.
func (s *Store) ListKeys(ctx context.Context) ([]Key, error) {
	rs, err := s.db.query(ctx, `SELECT `+keyColumns+` FROM keys ORDER BY created_ms, id`)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rs.Close()
	var out []Key
	for rs.Next() {
		k, err := scanKey(rs)
		if err != nil {
			return nil, fmt.Errorf("list keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return out, nil
}

// HasKeys reports whether any key was ever created (revoked ones count:
// a server whose keys were all revoked must stay closed, not fall open).
func (s *Store) HasKeys(ctx context.Context) (bool, error) {
	var n int64
	if err := s.db.queryRow(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM keys LIMIT 1) AS any_key`).Scan(&n); err != nil {
		return false, fmt.Errorf("count keys: %w", err)
	}
	return n > 0, nil
}

const keyColumns = `id, name, prefix, rate_per_min, concurrency, created_ms, revoked_ms`

// scanKey reads keyColumns, then extra columns into extra.
func scanKey(r scanner, extra ...any) (Key, error) {
	var k Key
	var created int64
	var revoked sql.NullInt64
	if err := r.Scan(append([]any{&k.ID, &k.Name, &k.Prefix, &k.RatePerMin, &k.Concurrency, &created, &revoked}, extra...)...); err != nil {
		return Key{}, err
	}
	k.Created = time.UnixMilli(created)
	if revoked.Valid {
		k.Revoked = time.UnixMilli(revoked.Int64)
	}
	return k, nil
}

func queryKey(ctx context.Context, c conn, where string, arg any) (Key, error) {
	k, err := scanKey(c.queryRow(ctx, `SELECT `+keyColumns+` FROM keys `+where, arg))
	if isNoRows(err) {
		return Key{}, ErrNotFound
	}
	if err != nil {
		return Key{}, fmt.Errorf("look up key: %w", err)
	}
	return k, nil
}
