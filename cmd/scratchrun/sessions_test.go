//go:build linux

package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// sessionsDB is a store with two keys and an open session of each, and
// the sessions' ids.
func sessionsDB(t *testing.T) (db string, ids [2]string) {
	t.Helper()
	db = filepath.Join(t.TempDir(), "keys.db")
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	for i, name := range []string{"alice", "bob"} {
		k, _, err := st.CreateKey(ctx, store.NewKey{Name: name, RatePerMin: 60, Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = execapi.NewSessionID()
		if err := st.InsertCodeSession(ctx, store.CodeSession{IDHash: store.HashSessionID(ids[i]), Owner: k.ID, Server: "h/e1_1",
			Runtime: []string{"python3.13", "node22"}[i], Created: now, Expires: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	return db, ids
}

// sessions list shows the open sessions (every key's, or one key's) by
// id hash, never the id; sessions end asks through the row, by the
// listing's hash or by the id, and says when the server ends it.
func TestSessionsCommands(t *testing.T) {
	db, ids := sessionsDB(t)
	short := func(id string) string { return store.HashSessionID(id)[:sessionHashShown] }

	r := asCLI(t, nil, "sessions", "list", "--db", db)
	if r.code != 0 || !regexp.MustCompile(short(ids[0])+`\s+alice\s+python3.13\s+-\s`).MatchString(r.stdout) ||
		!regexp.MustCompile(short(ids[1])+`\s+bob\s+node22\s`).MatchString(r.stdout) {
		t.Fatalf("sessions list: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, ids[0]) || strings.Contains(r.stdout, ids[1]) {
		t.Error("sessions list shows a session id")
	}
	if r := asCLI(t, nil, "sessions", "list", "--all-keys", "--db", db); r.code != 0 || !strings.Contains(r.stdout, "bob") {
		t.Errorf("sessions list --all-keys: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = asCLI(t, nil, "sessions", "list", "--key", "bob", "--db", db)
	if r.code != 0 || strings.Contains(r.stdout, "alice") || !strings.Contains(r.stdout, short(ids[1])) {
		t.Errorf("sessions list --key bob: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := asCLI(t, nil, "sessions", "list", "--key", "carol", "--db", db); r.code != exitUsage {
		t.Errorf("sessions list --key of no key: %d %s", r.code, r.stderr)
	}

	r = asCLI(t, []string{"SCRATCHRUN_DB=" + db}, "sessions", "end", short(ids[0]))
	if r.code != 0 || !strings.Contains(r.stdout, "asked the server to end session "+short(ids[0])+" (key alice)") || !strings.Contains(r.stdout, "within 2s") {
		t.Fatalf("sessions end: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := asCLI(t, nil, "sessions", "end", ids[1], "--db", db); r.code != 0 || !strings.Contains(r.stdout, "(key bob)") {
		t.Errorf("sessions end by id: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = asCLI(t, nil, "sessions", "list", "--db", db)
	if n := strings.Count(r.stdout, "end requested"); n != 2 {
		t.Errorf("after two ends, %d sessions show the request:\n%s", n, r.stdout)
	}
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if row, err := st.CodeSession(context.Background(), store.HashSessionID(ids[0])); err != nil || !row.EndRequested || !row.Open() {
		t.Errorf("row after end: %+v, %v", row, err)
	}

	if r := asCLI(t, nil, "sessions", "end", "0123456789ab", "--db", db); r.code != exitInternal || !strings.Contains(r.stderr, "no such session") {
		t.Errorf("end of no session: %d %s", r.code, r.stderr)
	}
	if r := asCLI(t, nil, "sessions", "end", "ab", "--db", db); r.code != exitInternal || !strings.Contains(r.stderr, "at least 8") {
		t.Errorf("end of a short hash: %d %s", r.code, r.stderr)
	}
	if r := asCLI(t, nil, "sessions", "end", "--db", db); r.code != exitUsage {
		t.Errorf("end of nothing: %d %s", r.code, r.stderr)
	}
	if r := asCLI(t, nil, "sessions"); r.code != exitUsage || !strings.Contains(r.stderr, "scratchrun sessions COMMAND") {
		t.Errorf("sessions alone: %d %s", r.code, r.stderr)
	}
}
