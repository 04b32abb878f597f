package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/testenv/postgres"
)

// The server does one Authenticate, one Admit, one Release and one
// RecordUsage per run with a key.

func BenchmarkAuthenticate(b *testing.B) {
	eachBackendB(b, func(b *testing.B, s *Store) {
		_, secret, _ := s.CreateKey(context.Background(), NewKey{Name: "b", RatePerMin: 1, Concurrency: 1})
		for b.Loop() {
			if _, err := s.Authenticate(context.Background(), secret); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkAdmitRelease(b *testing.B) {
	eachBackendB(b, func(b *testing.B, s *Store) {
		k, _, _ := s.CreateKey(context.Background(), NewKey{Name: "b", RatePerMin: 1 << 30, Concurrency: 1})
		for b.Loop() {
			lease, err := s.Admit(context.Background(), k.ID, time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Release(context.Background(), lease, false); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkRecordUsage(b *testing.B) {
	eachBackendB(b, func(b *testing.B, s *Store) {
		u := Usage{KeyID: "key_x", Runtime: "bash", Started: time.Now(), Duration: time.Second, Outcome: "success"}
		for b.Loop() {
			if err := s.RecordUsage(context.Background(), u); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func eachBackendB(b *testing.B, f func(b *testing.B, s *Store)) {
	b.Run("sqlite", func(b *testing.B) {
		f(b, openB(b, filepath.Join(b.TempDir(), "keys.db")))
	})
	b.Run("postgres", func(b *testing.B) {
		f(b, openB(b, postgres.Shared(b).NewDatabase(b)))
	})
}

func openB(b *testing.B, dsn string) *Store {
	b.Helper()
	s, err := Open(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
