package store

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// Idempotency entries: of concurrent claims of one key (through two
// handles: two front ends) exactly one wins and the others get its entry;
// an entry finishes once with its answer, or is released for a retry;
// expired entries are gone and swept; callers are apart; answers are
// bounded.
func TestIdempotencyEntries(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, other := b.open(t), b.open(t)
		now := time.Now()
		claim := func(caller, key, hash string) IdempotencyClaim {
			return IdempotencyClaim{Caller: caller, Key: key, BodyHash: hash, At: now, Window: 24 * time.Hour}
		}

		var won atomic.Int64
		atOnce(t, 8, []*Store{s, other}, func(i int, st *Store) error {
			e, claimed, err := st.ClaimIdempotency(ctx, claim("k1", "race", "h1"))
			if err != nil {
				return err
			}
			if claimed {
				won.Add(1)
			}
			if e.BodyHash != "h1" || e.Done {
				t.Errorf("claim %d: %+v", i, e)
			}
			return nil
		})
		if won.Load() != 1 {
			t.Fatalf("%d of 8 concurrent claims of one key won", won.Load())
		}

		// Done: the answer, to every handle; not finished twice.
		body := []byte("{\"exit_code\":0}\n\x00\xff")
		if err := s.FinishIdempotency(ctx, "k1", "race", 200, "application/json", body); err != nil {
			t.Fatal(err)
		}
		e, err := other.IdempotencyEntry(ctx, "k1", "race")
		if err != nil || !e.Done || e.Status != 200 || e.ContentType != "application/json" || !bytes.Equal(e.Body, body) || e.BodyHash != "h1" {
			t.Fatalf("finished entry: %+v, %v", e, err)
		}
		if e.Expires.Sub(e.Created) != 24*time.Hour {
			t.Errorf("entry lives %s, want 24h", e.Expires.Sub(e.Created))
		}
		if _, claimed, err := other.ClaimIdempotency(ctx, claim("k1", "race", "h2")); claimed || err != nil {
			t.Errorf("claim of a done key: claimed %v, %v", claimed, err)
		}
		if err := s.FinishIdempotency(ctx, "k1", "race", 500, "", nil); !errors.Is(err, ErrIdempotencyNotFound) {
			t.Errorf("finishing a done entry: %v", err)
		}
		if err := s.ReleaseIdempotency(ctx, "k1", "race"); !errors.Is(err, ErrIdempotencyNotFound) {
			t.Errorf("releasing a done entry: %v", err)
		}

		// Another caller's same key is an entry of its own.
		if e, claimed, err := s.ClaimIdempotency(ctx, claim("k2", "race", "h9")); !claimed || err != nil || e.Caller != "k2" {
			t.Errorf("another caller's claim of the same key: %+v, %v, %v", e, claimed, err)
		}
		if e, _ := s.IdempotencyEntry(ctx, "k1", "race"); e.BodyHash != "h1" {
			t.Errorf("k1's entry after k2's claim: %+v", e)
		}
		if _, err := s.IdempotencyEntry(ctx, "", "race"); !errors.Is(err, ErrIdempotencyNotFound) {
			t.Errorf("open mode sees a key's entry: %v", err)
		}

		// Released: gone, and the next claim wins.
		if err := s.ReleaseIdempotency(ctx, "k2", "race"); err != nil {
			t.Fatal(err)
		}
		if _, err := other.IdempotencyEntry(ctx, "k2", "race"); !errors.Is(err, ErrIdempotencyNotFound) {
			t.Errorf("released entry: %v", err)
		}
		if _, claimed, err := other.ClaimIdempotency(ctx, claim("k2", "race", "h9")); !claimed || err != nil {
			t.Errorf("claim after release: %v, %v", claimed, err)
		}

		// Too large an answer is refused, and the entry stays running.
		if _, _, err := s.ClaimIdempotency(ctx, claim("k1", "big", "h")); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishIdempotency(ctx, "k1", "big", 200, "application/json", make([]byte, MaxIdempotentBody+1)); !errors.Is(err, ErrIdempotentBodyTooLarge) {
			t.Errorf("answer past the bound: %v", err)
		}
		if e, err := s.IdempotencyEntry(ctx, "k1", "big"); err != nil || e.Done {
			t.Errorf("entry after a refused answer: %+v, %v", e, err)
		}
		if err := s.FinishIdempotency(ctx, "k1", "big", 200, "application/json", make([]byte, MaxIdempotentBody)); err != nil {
			t.Errorf("answer at the bound: %v", err)
		}

		// Expired: not there, claimed anew, and swept by the next write.
		old := claim("k1", "old", "h-old")
		old.At = now.Add(-25 * time.Hour)
		if _, claimed, err := s.ClaimIdempotency(ctx, old); !claimed || err != nil {
			t.Fatal(claimed, err)
		}
		if _, err := s.IdempotencyEntry(ctx, "k1", "old"); !errors.Is(err, ErrIdempotencyNotFound) {
			t.Errorf("expired entry: %v", err)
		}
		stale := claim("k1", "stale", "h")
		stale.At = now.Add(-25 * time.Hour)
		if _, _, err := s.ClaimIdempotency(ctx, stale); err != nil {
			t.Fatal(err)
		}
		if e, claimed, err := s.ClaimIdempotency(ctx, claim("k1", "old", "h-new")); !claimed || err != nil || e.BodyHash != "h-new" {
			t.Errorf("claim of an expired key: %+v, %v, %v", e, claimed, err)
		}
		var rows int
		if err := s.db.queryRow(ctx, `SELECT COUNT(*) FROM idempotency WHERE idem_key = 'stale'`).Scan(&rows); err != nil || rows != 0 {
			t.Errorf("%d expired rows left after a write, %v", rows, err)
		}
	})
}
