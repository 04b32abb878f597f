package store

import (
	"context"
	"errors"
	"testing"
)

// A key's field refused by CreateKey or SetLimits is named as data, so that
// a front end can point at it, with the message the CLI has always printed.
func TestKeyFieldErrors(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		if _, _, err := s.CreateKey(ctx, NewKey{Name: "taken", RatePerMin: 1, Concurrency: 1}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			err   error
			field string
			text  string
		}{
			{second(s.CreateKey(ctx, NewKey{Name: "bad name", RatePerMin: 1, Concurrency: 1})), FieldName, `name "bad name": use 1 to 64`},
			{second(s.CreateKey(ctx, NewKey{Name: "taken", RatePerMin: 1, Concurrency: 1})), FieldName, `name "taken": an active key already has it`},
			{second(s.CreateKey(ctx, NewKey{Name: "ok", RatePerMin: 0, Concurrency: 1})), FieldRate, "rate 0/min: must be positive"},
			{second(s.CreateKey(ctx, NewKey{Name: "ok", RatePerMin: 1, Concurrency: 0})), FieldConcurrency, "concurrency 0: must be positive"},
			{first(s.SetLimits(ctx, "taken", LimitChange{})), FieldRate, "no limit to change"},
			{first(s.SetLimits(ctx, "taken", LimitChange{Concurrency: -2})), FieldConcurrency, "concurrency -2: must be positive"},
		} {
			var fe *KeyFieldError
			if !errors.As(c.err, &fe) || fe.Field != c.field || len(c.err.Error()) < len(c.text) || c.err.Error()[:len(c.text)] != c.text {
				t.Errorf("error %v (%#v), want field %s and a message starting %q", c.err, fe, c.field, c.text)
			}
		}
	})
}

func first[A any](_ A, err error) error { return err }

func second[A, B any](_ A, _ B, err error) error { return err }
