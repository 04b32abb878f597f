package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Spend takes a token of the key's rate, shared with Admit's, and no
// concurrency slot: a key whose one slot is held may still spend, a key
// whose rate is used up may neither spend nor be admitted, and a revoked
// or unknown key is ErrNotFound. Through a Limiter, Retry-After is at
// least a second and no key ("") has no limits.
func TestSpendTakesRateNotSlots(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		k, _, _ := s.CreateKey(ctx, NewKey{Name: "two", RatePerMin: 2, Concurrency: 1})
		if _, err := s.Admit(ctx, k.ID, time.Second); err != nil {
			t.Fatal(err)
		}
		if err := s.Spend(ctx, k.ID); err != nil {
			t.Fatalf("spend beside the key's one call in flight: %v", err)
		}
		var le *LimitError
		if err := s.Spend(ctx, k.ID); !errors.As(err, &le) || le.Limit != LimitRate || le.Max != 2 {
			t.Fatalf("third token of a 2/min key: %v, want a rate refusal", err)
		}
		other, _, _ := s.CreateKey(ctx, NewKey{Name: "one", RatePerMin: 1, Concurrency: 1})
		if err := s.Spend(ctx, other.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Admit(ctx, other.ID, time.Second); !errors.As(err, &le) || le.Limit != LimitRate {
			t.Errorf("a call after the key's one token was spent: %v, want a rate refusal", err)
		}
		if _, err := s.Revoke(ctx, other.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.Spend(ctx, other.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("revoked key: %v", err)
		}
		if err := s.Spend(ctx, "key_nosuch"); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown key: %v", err)
		}
		l := NewLimiter(s, nil)
		if err := l.Spend(ctx, ""); err != nil {
			t.Errorf("no key: %v", err)
		}
		if err := l.Spend(ctx, k.ID); !errors.As(err, &le) || le.RetryAfter < time.Second {
			t.Errorf("through the Limiter: %v", err)
		}
	})
}
