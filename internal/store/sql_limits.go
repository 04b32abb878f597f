package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Admit lets one call of an active key start, in one transaction, if the
// key is within its limits across every process sharing the database:
// it spends a token of the key's rate and takes a lease on one of its
// concurrency slots, which expires LeaseTTL from now unless renewed.
// expect is how long the call is expected to hold the slot (it feeds
// the Retry-After of the key's next refusal). A key that does not exist
// or is revoked is ErrNotFound; one at a limit, a *LimitError. Use a
// Limiter rather than calling this directly: it renews the lease.
func (s *Store) Admit(ctx context.Context, keyID string, expect time.Duration) (Lease, error) {
	var lease Lease
	err := s.db.inTx(ctx, func(c conn) error {
		k, err := s.lockActiveKey(ctx, c, keyID)
		if err != nil {
			return err
		}
		// Read after the lock is held, so that what this transaction sees
		// includes everything the previous holder wrote.
		var nowUS int64
		var tokens sql.NullFloat64
		var atUS sql.NullInt64
		var inFlight, expired, soonestUS int64
		err = c.queryRow(ctx, `SELECT clock.us, b.tokens, b.at_us,
			(SELECT COUNT(*) FROM leases l WHERE l.key_id = ? AND l.expires_us > clock.us),
			(SELECT COUNT(*) FROM leases l WHERE l.key_id = ? AND l.expires_us <= clock.us),
			(SELECT COALESCE(MIN(l.expect_end_us), 0) FROM leases l WHERE l.key_id = ? AND l.expires_us > clock.us)
			FROM (SELECT `+s.d.nowUS+` AS us) clock LEFT JOIN rate_buckets b ON b.key_id = ?`, keyID, keyID, keyID, keyID).
			Scan(&nowUS, &tokens, &atUS, &inFlight, &expired, &soonestUS)
		if err != nil {
			return fmt.Errorf("read the limits of %s: %w", keyID, err)
		}
		b, err := takeToken(k, nowUS, tokens, atUS)
		if err != nil {
			return err
		}
		if inFlight >= int64(k.Concurrency) {
			return &LimitError{Limit: LimitConcurrency, Max: k.Concurrency, RetryAfter: time.Duration(max(soonestUS-nowUS, 0)) * time.Microsecond}
		}
		if expired > 0 {
			// The leases of a front end that stopped renewing them.
			if _, err := c.exec(ctx, `DELETE FROM leases WHERE key_id = ? AND expires_us <= ?`, keyID, nowUS); err != nil {
				return fmt.Errorf("drop expired leases of %s: %w", keyID, err)
			}
		}
		if err := writeBucket(ctx, c, keyID, b); err != nil {
			return err
		}
		err = c.queryRow(ctx, `INSERT INTO leases (key_id, expires_us, expect_end_us) VALUES (?, ?, ?) RETURNING id`,
			keyID, nowUS+LeaseTTL.Microseconds(), nowUS+expect.Microseconds()).Scan(&lease.ID)
		if err != nil {
			return fmt.Errorf("take a slot of %s: %w", keyID, err)
		}
		lease.Key = k
		return nil
	})
	if err != nil {
		return Lease{}, err
	}
	return lease, nil
}

// Spend spends one token of an active key's rate, in one transaction,
// and takes no concurrency slot: for what counts against the key's
// rate without being a call in flight (opening an MCP session). A key
// that does not exist or is revoked is ErrNotFound; one whose rate is
// used up, a *LimitError. Use Limiter.Spend for its Retry-After.
func (s *Store) Spend(ctx context.Context, keyID string) error {
	return s.db.inTx(ctx, func(c conn) error {
		// Under the key's lock, as Admit spends, so that neither overwrites
		// the other's bucket.
		k, err := s.lockActiveKey(ctx, c, keyID)
		if err != nil {
			return err
		}
		var nowUS int64
		var tokens sql.NullFloat64
		var atUS sql.NullInt64
		err = c.queryRow(ctx, `SELECT clock.us, b.tokens, b.at_us
			FROM (SELECT `+s.d.nowUS+` AS us) clock LEFT JOIN rate_buckets b ON b.key_id = ?`, keyID).Scan(&nowUS, &tokens, &atUS)
		if err != nil {
			return fmt.Errorf("read the rate of %s: %w", keyID, err)
		}
		b, err := takeToken(k, nowUS, tokens, atUS)
		if err != nil {
			return err
		}
		return writeBucket(ctx, c, keyID, b)
	})
}

// lockActiveKey reads key keyID and locks its row until the end of c's
// transaction: every admission and spending of one key, on every front end,
// takes its turn; other keys are not held up. A revoked key is ErrNotFound.
func (s *Store) lockActiveKey(ctx context.Context, c conn, keyID string) (Key, error) {
	k, err := queryKey(ctx, c, `WHERE id = ?`+s.d.lockRow, keyID)
	if err != nil {
		return Key{}, err
	}
	if !k.Active() {
		return Key{}, ErrNotFound
	}
	return k, nil
}

// takeToken is k's bucket as stored (tokens at atUS; none stored: a key's
// first call finds it full), refilled to nowUS, with one token taken; a
// *LimitError when it holds none.
func takeToken(k Key, nowUS int64, tokens sql.NullFloat64, atUS sql.NullInt64) (bucket, error) {
	b := bucket{tokens: float64(k.RatePerMin), atUS: nowUS}
	if tokens.Valid && atUS.Valid {
		b = bucket{tokens: tokens.Float64, atUS: atUS.Int64}
	}
	b = b.refilled(nowUS, k.RatePerMin)
	if b.tokens < 1 {
		return bucket{}, &LimitError{Limit: LimitRate, Max: k.RatePerMin, RetryAfter: b.untilToken(k.RatePerMin)}
	}
	b.tokens--
	return b, nil
}

// writeBucket stores the key's bucket.
func writeBucket(ctx context.Context, c conn, keyID string, b bucket) error {
	if _, err := c.exec(ctx, `INSERT INTO rate_buckets (key_id, tokens, at_us) VALUES (?, ?, ?)
		ON CONFLICT (key_id) DO UPDATE SET tokens = excluded.tokens, at_us = excluded.at_us`, keyID, b.tokens, b.atUS); err != nil {
		return fmt.Errorf("spend a token of %s: %w", keyID, err)
	}
	return nil
}

// Renew extends the given leases to LeaseTTL from now and returns those
// it found (a lease missing here expired and its slot may be in use).
func (s *Store) Renew(ctx context.Context, leaseIDs []int64) ([]int64, error) {
	if len(leaseIDs) == 0 {
		return nil, nil
	}
	args := []any{LeaseTTL.Microseconds()}
	for _, id := range leaseIDs {
		args = append(args, id)
	}
	rs, err := s.db.query(ctx, `UPDATE leases SET expires_us = `+s.d.nowUS+` + ? WHERE id IN (`+placeholders(len(leaseIDs))+`) RETURNING id`, args...)
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	defer rs.Close()
	var renewed []int64
	for rs.Next() {
		var id int64
		if err := rs.Scan(&id); err != nil {
			return nil, fmt.Errorf("renew leases: %w", err)
		}
		renewed = append(renewed, id)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	return renewed, nil
}

// Release ends a lease; refund gives its rate token back too, for a
// call that was admitted and then did not run.
func (s *Store) Release(ctx context.Context, lease Lease, refund bool) error {
	if !refund {
		// One statement, the common case: a call that ran.
		if _, err := s.db.exec(ctx, `DELETE FROM leases WHERE id = ?`, lease.ID); err != nil {
			return fmt.Errorf("release lease %d: %w", lease.ID, err)
		}
		return nil
	}
	return s.db.inTx(ctx, func(c conn) error {
		if _, err := c.exec(ctx, `DELETE FROM leases WHERE id = ?`, lease.ID); err != nil {
			return fmt.Errorf("release lease %d: %w", lease.ID, err)
		}
		// Under the key's lock, as Admit writes the bucket, so that neither
		// overwrites the other; the bucket is capped at the key's rate when
		// it is next refilled.
		if _, err := queryKey(ctx, c, `WHERE id = ?`+s.d.lockRow, lease.Key.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("refund a token of %s: %w", lease.Key.ID, err)
		}
		if _, err := c.exec(ctx, `UPDATE rate_buckets SET tokens = tokens + 1 WHERE key_id = ?`, lease.Key.ID); err != nil {
			return fmt.Errorf("refund a token of %s: %w", lease.Key.ID, err)
		}
		return nil
	})
}
