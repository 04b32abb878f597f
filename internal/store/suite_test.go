package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/testenv/postgres"
)

// One suite, run against both implementations: every test here that takes
// a backend runs as <Test>/sqlite and <Test>/postgres, the latter on a real
// PostgreSQL server started for this binary (package testenv/postgres).

func TestMain(m *testing.M) {
	if runLeaseHolder() {
		return
	}
	code := m.Run()
	if err := postgres.StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// backend is one database under test.
type backend struct {
	name string
	// dsn is what Open takes: a file path or a postgres:// URL.
	dsn string
	// onDisk returns the files that hold the database's data, after
	// making the database write everything there.
	onDisk func(t *testing.T, s *Store) []string
	// exec runs one statement outside the Store (to age a database, or
	// make it look newer).
	exec func(t *testing.T, sql string)
}

// open opens a handle on the backend's database, closed when t ends.
func (b backend) open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), b.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// atOnce runs call(i, st) for i from 0 to n-1, all at once, each on one of
// handles in turn (st = handles[i%len(handles)]: front ends sharing the
// database), and fails t on any error.
func atOnce(t *testing.T, n int, handles []*Store, call func(i int, st *Store) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- call(i, handles[i%len(handles)])
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// eachBackend runs f on a fresh database of each implementation.
func eachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	t.Run("sqlite", func(t *testing.T) { f(t, sqliteBackend(t)) })
	t.Run("postgres", func(t *testing.T) { f(t, postgresBackend(t)) })
}

func sqliteBackend(t *testing.T) backend {
	path := filepath.Join(t.TempDir(), "sub", "keys.db")
	return backend{
		name: "sqlite", dsn: path,
		onDisk: func(t *testing.T, s *Store) []string {
			if _, err := s.db.exec(context.Background(), `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
				t.Fatal(err)
			}
			return []string{path, path + "-wal"}
		},
		exec: func(t *testing.T, sql string) {
			s := rawSQLite(t, path)
			defer s.Close()
			if _, err := s.Exec(sql); err != nil {
				t.Fatal(err)
			}
		},
	}
}

func postgresBackend(t *testing.T) backend {
	cluster := postgres.Shared(t)
	url := cluster.NewDatabase(t)
	return backend{
		name: "postgres", dsn: url,
		onDisk: func(t *testing.T, s *Store) []string {
			if _, err := s.db.exec(context.Background(), `CHECKPOINT`); err != nil {
				t.Fatal(err)
			}
			var files []string
			filepath.WalkDir(cluster.DataDir(), func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					files = append(files, p)
				}
				return nil
			})
			return files
		},
		exec: func(t *testing.T, sql string) {
			if err := pgExecURL(url, sql); err != nil {
				t.Fatal(err)
			}
		},
	}
}

var keyShape = regexp.MustCompile(`^sr_live_[0-9A-Za-z]{43}$`)

func TestCreateAuthenticateRevoke(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
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
		if err != nil || got.ID != k.ID || got.RatePerMin != 60 || got.Concurrency != 2 || !got.Active() || !got.Created.Equal(k.Created) {
			t.Fatalf("Authenticate = %+v, %v", got, err)
		}
		for _, bad := range []string{"", "sr_live_", secret + "x", secret[:len(secret)-1], strings.ToUpper(secret), "Bearer " + secret} {
			if _, err := s.Authenticate(ctx, bad); !errors.Is(err, ErrNotFound) {
				t.Errorf("Authenticate(%q) = %v, want ErrNotFound", bad, err)
			}
		}
		// The secret is nowhere in the database's files, only its hash.
		for _, f := range b.onDisk(t, s) {
			data, _ := os.ReadFile(f)
			if strings.Contains(string(data), secret) || strings.Contains(string(data), secret[len(k.Prefix):]) {
				t.Errorf("%s holds the key's secret", f)
			}
		}

		// Revoke by name; the next Authenticate fails at once, also from
		// another handle (as `scratchrun keys revoke` is another process,
		// and another front end another machine).
		other := b.open(t)
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
		if _, err := s.ActiveKey(ctx, "alice"); !errors.Is(err, ErrNotFound) {
			t.Errorf("ActiveKey of a revoked key = %v", err)
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
		if a, err := s.ActiveKey(ctx, "alice"); err != nil || a.ID != k2.ID {
			t.Errorf("ActiveKey by name = %+v, %v; want the new key", a, err)
		}
		if _, err := s.Revoke(ctx, k2.ID); err != nil {
			t.Errorf("revoke by id: %v", err)
		}
		if keys, _ := s.ListKeys(ctx); len(keys) != 2 || keys[0].ID != k.ID || keys[1].ID != k2.ID {
			t.Errorf("ListKeys = %+v, want both keys oldest first", keys)
		}
	})
}

func TestCreateKeyRefusesBadInput(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		if _, _, err := s.CreateKey(ctx, NewKey{Name: "bob", RatePerMin: 1, Concurrency: 1}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			nk   NewKey
			want string
		}{
			{NewKey{Name: "", RatePerMin: 1, Concurrency: 1}, "name"},
			{NewKey{Name: "has space", RatePerMin: 1, Concurrency: 1}, "name"},
			{NewKey{Name: strings.Repeat("a", 65), RatePerMin: 1, Concurrency: 1}, "name"},
			{NewKey{Name: "ok", RatePerMin: 0, Concurrency: 1}, "rate"},
			{NewKey{Name: "ok", RatePerMin: 1, Concurrency: 0}, "concurrency"},
			{NewKey{Name: "ok", RatePerMin: -1, Concurrency: 1}, "rate"},
			{NewKey{Name: "bob", RatePerMin: 1, Concurrency: 1}, "active key already has it"},
		} {
			if _, _, err := s.CreateKey(ctx, c.nk); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("CreateKey(%+v) = %v, want an error about %s", c.nk, err, c.want)
			}
		}
		keys, _ := s.ListKeys(ctx)
		if len(keys) != 1 {
			t.Errorf("%d keys after refused creates, want 1", len(keys))
		}
	})
}

func TestKeysAreUnique(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
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
	})
}

// Limits change in place, by id or name; bad changes name what is wrong;
// a revoked key's limits cannot be changed.
func TestSetLimits(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		k, _, _ := s.CreateKey(ctx, NewKey{Name: "carol", RatePerMin: 60, Concurrency: 2})
		got, err := s.SetLimits(ctx, "carol", LimitChange{Concurrency: 5})
		if err != nil || got.RatePerMin != 60 || got.Concurrency != 5 {
			t.Fatalf("SetLimits(concurrency 5) = %+v, %v", got, err)
		}
		got, err = b.open(t).SetLimits(ctx, k.ID, LimitChange{RatePerMin: 10})
		if err != nil || got.RatePerMin != 10 || got.Concurrency != 5 {
			t.Fatalf("SetLimits(rate 10) = %+v, %v", got, err)
		}
		if stored, _ := s.KeyByID(ctx, k.ID); stored.RatePerMin != 10 || stored.Concurrency != 5 {
			t.Errorf("stored limits %d/min, %d", stored.RatePerMin, stored.Concurrency)
		}
		for _, c := range []struct {
			change LimitChange
			want   string
		}{{LimitChange{}, "no limit to change"}, {LimitChange{RatePerMin: -1}, "rate"}, {LimitChange{Concurrency: -2}, "concurrency"}} {
			if _, err := s.SetLimits(ctx, k.ID, c.change); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("SetLimits(%+v) = %v, want an error about %s", c.change, err, c.want)
			}
		}
		s.Revoke(ctx, k.ID)
		if _, err := s.SetLimits(ctx, k.ID, LimitChange{RatePerMin: 1}); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetLimits of a revoked key = %v", err)
		}
	})
}

// Usage rows written concurrently, from two handles (server and CLI, or two
// front ends), are all there, once each, and add up.
func TestUsageConcurrentAndSummaries(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, other := b.open(t), b.open(t)
		base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
		atOnce(t, 200, []*Store{s, other}, func(i int, st *Store) error {
			worker := fmt.Sprintf("w%d", i%4)
			if i%4 == 0 {
				worker = "" // recorded as local
			}
			return st.RecordUsage(ctx, Usage{
				KeyID: fmt.Sprintf("key_%d", i%3), Runtime: "bash", Worker: worker, Started: base.Add(time.Duration(i) * time.Second),
				Duration: time.Duration(i) * time.Millisecond, ExitCode: i % 2, Outcome: []string{"success", "nonzero_exit"}[i%2],
				BytesIn: int64(i), BytesOut: 2 * int64(i),
			})
		})
		all, err := s.ListUsage(ctx, UsageFilter{})
		if err != nil || len(all) != 200 {
			t.Fatalf("ListUsage = %d rows, %v", len(all), err)
		}
		workers := map[string]int{}
		for i, u := range all {
			if i > 0 && u.Started.Before(all[i-1].Started) {
				t.Fatal("rows are not oldest first")
			}
			workers[u.Worker]++
			if i := int(u.BytesIn); u.Duration != time.Duration(i)*time.Millisecond || u.BytesOut != 2*int64(i) || !u.Started.Equal(base.Add(time.Duration(i)*time.Second)) {
				t.Errorf("row %d read back as %+v", i, u)
			}
		}
		if workers[LocalWorker] != 50 || workers["w1"] != 50 || workers["w3"] != 50 {
			t.Errorf("rows per worker %v, want 50 each of local, w1, w2, w3", workers)
		}
		sums, err := s.SummarizeUsage(ctx, UsageFilter{})
		if err != nil || len(sums) != 3 {
			t.Fatalf("SummarizeUsage = %+v, %v", sums, err)
		}
		var runs, in, out int64
		var dur time.Duration
		for _, sum := range sums {
			runs += sum.Runs
			in += sum.BytesIn
			out += sum.BytesOut
			dur += sum.Duration
			if sum.Outcomes["success"]+sum.Outcomes["nonzero_exit"] != sum.Runs {
				t.Errorf("outcomes of %s do not add up: %v", sum.KeyID, sum.Outcomes)
			}
		}
		if runs != 200 || in != 199*200/2 || out != 199*200 || dur != 199*200/2*time.Millisecond {
			t.Errorf("totals runs %d in %d out %d duration %s", runs, in, out, dur)
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
		if sums, _ := s.SummarizeUsage(ctx, UsageFilter{KeyIDs: []string{"key_1", "key_2"}}); len(sums) != 2 || sums[0].KeyID != "key_1" {
			t.Errorf("summary of two keys: %+v", sums)
		}
		if none, _ := s.ListUsage(ctx, UsageFilter{KeyIDs: []string{}}); len(none) != 0 {
			t.Errorf("an empty key list selected %d rows", len(none))
		}
		if last, _ := s.ListUsage(ctx, UsageFilter{Limit: 5}); len(last) != 5 || !last[4].Started.Equal(all[199].Started) {
			t.Errorf("Limit 5 did not return the newest five")
		}
	})
}

// A database is migrated from empty, a second open changes nothing, a
// database a newer binary migrated is refused rather than misread, and
// processes opening a new database at once migrate it once.
func TestMigrations(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		want := len(sqliteMigrations)
		if v, err := s.schemaVersion(ctx); err != nil || v != want {
			t.Errorf("schema version %d, %v; want %d", v, err, want)
		}
		k, _, err := s.CreateKey(ctx, NewKey{Name: "kept", RatePerMin: 1, Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		again := b.open(t)
		if got, err := again.KeyByID(ctx, k.ID); err != nil || got.Name != "kept" {
			t.Errorf("after reopening: %+v, %v", got, err)
		}
		again.Close()
		b.exec(t, `UPDATE schema_version SET version = 99`)
		if s, err := Open(ctx, b.dsn); err == nil || !strings.Contains(err.Error(), "newer") {
			if err == nil {
				s.Close()
			}
			t.Errorf("opening a newer schema: %v", err)
		}
		b.exec(t, fmt.Sprintf(`UPDATE schema_version SET version = %d`, want))
	})
	t.Run("concurrent", func(t *testing.T) {
		eachBackend(t, func(t *testing.T, b backend) {
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					st, err := Open(context.Background(), b.dsn)
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
			var rows int
			s := b.open(t)
			if err := s.db.queryRow(context.Background(), `SELECT COUNT(*) FROM schema_version`).Scan(&rows); err != nil || rows != 1 {
				t.Errorf("schema_version has %d rows, %v", rows, err)
			}
		})
	})
}

// A database of the first schema (before limits were shared and runs named
// their worker) is brought up to date with its keys and usage kept; its
// runs are the local machine's.
func TestMigrationFromVersionOne(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		first := sqliteMigrations[0]
		if b.name == "postgres" {
			first = postgresMigrations[0]
		}
		if b.name == "sqlite" {
			os.MkdirAll(filepath.Dir(b.dsn), 0o700)
		}
		b.exec(t, `CREATE TABLE schema_version (version INTEGER NOT NULL); INSERT INTO schema_version VALUES (1); `+first+`;
			INSERT INTO keys (id, name, hash, prefix, rate_per_min, concurrency, created_ms) VALUES ('key_old', 'old', 'h', 'sr_live_oldx', 5, 1, 1700000000000);
			INSERT INTO usage (key_id, runtime, started_ms, duration_ms, exit_code, outcome, bytes_in, bytes_out) VALUES ('key_old', 'bash', 1700000000000, 12, 0, 'success', 3, 4)`)
		s := b.open(t)
		if v, _ := s.schemaVersion(ctx); v != len(sqliteMigrations) {
			t.Errorf("schema version %d after migrating", v)
		}
		rows, err := s.ListUsage(ctx, UsageFilter{})
		if err != nil || len(rows) != 1 || rows[0].Worker != LocalWorker || rows[0].KeyID != "key_old" || rows[0].Duration != 12*time.Millisecond {
			t.Errorf("usage after migrating: %+v, %v", rows, err)
		}
		if _, err := s.Admit(ctx, "key_old", time.Second); err != nil {
			t.Errorf("a key of the old schema is not admitted: %v", err)
		}
	})
}

// The SQLite file is in WAL mode (servers and the keys commands use it at
// once) and readable by its owner only.
func TestSQLiteFile(t *testing.T) {
	b := sqliteBackend(t)
	s := b.open(t)
	var mode string
	if err := s.db.queryRow(context.Background(), `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v", mode, err)
	}
	if fi, err := os.Stat(b.dsn); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("database mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	if _, err := Open(context.Background(), filepath.Join(t.TempDir(), "a?b.db")); err == nil {
		t.Error("a path with '?' was opened")
	}
}

// Open tells a file from a PostgreSQL URL, refuses other URLs, and never
// prints a password it was given.
func TestOpenNamesAndRedacts(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, ""); err == nil {
		t.Error("an empty name was opened")
	}
	if _, err := Open(ctx, "mysql://u:hunter2@db/x"); err == nil || !strings.Contains(err.Error(), "postgres://") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("mysql URL: %v", err)
	}
	cluster := postgres.Shared(t)
	bad := strings.Replace(cluster.URL("no_such_db"), "postgres@", "postgres:hunter2@", 1)
	_, err := Open(ctx, bad)
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "no_such_db") {
		t.Errorf("opening a missing database: %v (must fail, name it, and hide the password)", err)
	}
	for in, want := range map[string]string{
		"postgres://u:hunter2@db:5432/x?sslmode=require": "postgres://u:xxxxx@db:5432/x?sslmode=require",
		"postgresql://u@db/x?password=hunter2":           "postgresql://u@db/x?password=xxxxx",
		"/var/lib/scratchrun/scratchrun.db":              "/var/lib/scratchrun/scratchrun.db",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	s := postgresBackend(t).open(t)
	if loc := s.Location(); !strings.HasPrefix(loc, "postgres://postgres@/") {
		t.Errorf("Location = %q", loc)
	}
}
