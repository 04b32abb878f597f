package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sub", "keys.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

var keyShape = regexp.MustCompile(`^sr_live_[0-9A-Za-z]{43}$`)

func TestCreateAuthenticateRevoke(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	if has, err := s.HasKeys(ctx); err != nil || has {
		t.Fatalf("new store HasKeys = %v, %v", has, err)
	}
	k, secret, err := s.CreateKey(ctx, NewKey{Name: "alice", RatePerMin: 60, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !keyShape.MatchString(secret) {
		t.Errorf("key %q does not have the shape sr_live_ + 43 base62 characters", secret)
	}
	if !strings.HasPrefix(secret, k.Prefix) || len(k.Prefix) >= len(secret)/2 {
		t.Errorf("display prefix %q of %q", k.Prefix, secret)
	}
	got, err := s.Authenticate(ctx, secret)
	if err != nil || got.ID != k.ID || got.RatePerMin != 60 || got.Concurrency != 2 || !got.Active() {
		t.Fatalf("Authenticate = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "sr_live_", secret + "x", secret[:len(secret)-1], strings.ToUpper(secret), "Bearer " + secret} {
		if _, err := s.Authenticate(ctx, bad); !errors.Is(err, ErrNotFound) {
			t.Errorf("Authenticate(%q) = %v, want ErrNotFound", bad, err)
		}
	}
	// The secret is nowhere in the file, only its hash.
	s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	for _, f := range []string{path, path + "-wal"} {
		data, _ := os.ReadFile(f)
		if strings.Contains(string(data), secret) || strings.Contains(string(data), secret[len(k.Prefix):]) {
			t.Errorf("%s holds the key's secret", f)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("database mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}

	// Revoke by name; the next Authenticate fails at once, also from another
	// handle on the file (as `scratchrun keys revoke` is another process).
	other, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Revoke(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, secret); !errors.Is(err, ErrNotFound) {
		t.Errorf("revoked key still authenticates: %v", err)
	}
	if _, err := other.Revoke(ctx, k.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second revoke = %v, want ErrNotFound", err)
	}
	byID, err := s.KeyByID(ctx, k.ID)
	if err != nil || byID.Active() {
		t.Errorf("KeyByID after revoke = %+v, %v", byID, err)
	}
	// A revoked key keeps the server closed.
	if has, _ := s.HasKeys(ctx); !has {
		t.Error("HasKeys is false with a revoked key")
	}
	// The name is free again once revoked.
	k2, _, err := s.CreateKey(ctx, NewKey{Name: "alice", RatePerMin: 1, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revoke(ctx, k2.ID); err != nil {
		t.Errorf("revoke by id: %v", err)
	}
}

func TestCreateKeyRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	if _, _, err := s.CreateKey(ctx, NewKey{Name: "bob", RatePerMin: 1, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	for _, nk := range []NewKey{
		{Name: "", RatePerMin: 1, Concurrency: 1},
		{Name: "has space", RatePerMin: 1, Concurrency: 1},
		{Name: strings.Repeat("a", 65), RatePerMin: 1, Concurrency: 1},
		{Name: "ok", RatePerMin: 0, Concurrency: 1},
		{Name: "ok", RatePerMin: 1, Concurrency: 0},
		{Name: "bob", RatePerMin: 1, Concurrency: 1}, // duplicate active name
	} {
		if _, _, err := s.CreateKey(ctx, nk); err == nil {
			t.Errorf("CreateKey(%+v) succeeded", nk)
		}
	}
	keys, _ := s.ListKeys(ctx)
	if len(keys) != 1 {
		t.Errorf("%d keys after refused creates, want 1", len(keys))
	}
}

func TestKeysAreUnique(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	seen := map[string]bool{}
	for i := range 50 {
		k, secret, err := s.CreateKey(ctx, NewKey{Name: fmt.Sprintf("k%d", i), RatePerMin: 1, Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		if seen[secret] || seen[k.ID] || !keyShape.MatchString(secret) {
			t.Fatalf("key %d: duplicate or malformed (%s)", i, k.ID)
		}
		seen[secret], seen[k.ID] = true, true
	}
}

// Usage rows written concurrently, from two handles (server and CLI), are
// all there and add up.
func TestUsageConcurrentAndSummaries(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	other, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := s
			if i%2 == 1 {
				st = other
			}
			errs <- st.RecordUsage(ctx, Usage{
				KeyID: fmt.Sprintf("key_%d", i%3), Runtime: "bash", Started: base.Add(time.Duration(i) * time.Second),
				Duration: time.Duration(i) * time.Millisecond, ExitCode: i % 2, Outcome: []string{"success", "nonzero_exit"}[i%2],
				BytesIn: int64(i), BytesOut: 2 * int64(i),
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.ListUsage(ctx, UsageFilter{})
	if err != nil || len(all) != 200 {
		t.Fatalf("ListUsage = %d rows, %v", len(all), err)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Started.Before(all[i-1].Started) {
			t.Fatal("rows are not oldest first")
		}
	}
	sums, err := s.SummarizeUsage(ctx, UsageFilter{})
	if err != nil || len(sums) != 3 {
		t.Fatalf("SummarizeUsage = %+v, %v", sums, err)
	}
	var runs, in, out int64
	for _, sum := range sums {
		runs += sum.Runs
		in += sum.BytesIn
		out += sum.BytesOut
		if sum.Outcomes["success"]+sum.Outcomes["nonzero_exit"] != sum.Runs {
			t.Errorf("outcomes of %s do not add up: %v", sum.KeyID, sum.Outcomes)
		}
	}
	if runs != 200 || in != 199*200/2 || out != 199*200 {
		t.Errorf("totals runs %d in %d out %d", runs, in, out)
	}
	since := base.Add(150 * time.Second)
	recent, _ := s.ListUsage(ctx, UsageFilter{Since: since, KeyIDs: []string{"key_0"}})
	for _, u := range recent {
		if u.KeyID != "key_0" || u.Started.Before(since) {
			t.Errorf("filter let through %+v", u)
		}
	}
	if want := 17; len(recent) != want { // i in 150..199 with i%3 == 0
		t.Errorf("filtered rows = %d, want %d", len(recent), want)
	}
	if none, _ := s.ListUsage(ctx, UsageFilter{KeyIDs: []string{}}); len(none) != 0 {
		t.Errorf("an empty key list selected %d rows", len(none))
	}
	if last, _ := s.ListUsage(ctx, UsageFilter{Limit: 5}); len(last) != 5 || !last[4].Started.Equal(all[199].Started) {
		t.Errorf("Limit 5 did not return the newest five")
	}
}

func TestMigrationsAndWAL(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	var mode string
	if err := s.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v", mode, err)
	}
	s.Close()
	// Reopening is a no-op migration.
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	var v int
	s2.db.QueryRow(`SELECT version FROM schema_version`).Scan(&v)
	if v != len(migrations) {
		t.Errorf("schema version %d, want %d", v, len(migrations))
	}
	// A file from a newer binary is refused rather than misread.
	s2.db.Exec(`UPDATE schema_version SET version = 99`)
	s2.Close()
	if _, err := Open(ctx, path); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("opening a newer schema: %v", err)
	}
	// Opening twice at once, on a fresh file, migrates once.
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := Open(ctx, fresh)
			if err == nil {
				st.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Errorf("concurrent open: %v", err)
		}
	}
	db, _ := sql.Open("sqlite", fresh)
	defer db.Close()
	var rows int
	db.QueryRow(`SELECT COUNT(*) FROM schema_version`).Scan(&rows)
	if rows != 1 {
		t.Errorf("schema_version has %d rows", rows)
	}
}
