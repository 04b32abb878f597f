package store

import (
	"context"
	"testing"
	"time"
)

// The server does one Authenticate, one KeyByID and one RecordUsage per run.

func BenchmarkAuthenticate(b *testing.B) {
	s, _ := openTempB(b)
	_, secret, _ := s.CreateKey(context.Background(), NewKey{Name: "b", RatePerMin: 1, Concurrency: 1})
	for b.Loop() {
		if _, err := s.Authenticate(context.Background(), secret); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRecordUsage(b *testing.B) {
	s, _ := openTempB(b)
	u := Usage{KeyID: "key_x", Runtime: "bash", Started: time.Now(), Duration: time.Second, Outcome: "success"}
	for b.Loop() {
		if err := s.RecordUsage(context.Background(), u); err != nil {
			b.Fatal(err)
		}
	}
}

func openTempB(b *testing.B) (*Store, string) {
	b.Helper()
	path := b.TempDir() + "/keys.db"
	s, err := Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, path
}
