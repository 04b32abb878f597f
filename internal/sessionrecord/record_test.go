package sessionrecord

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
	"github.com/scratchrun/scratchrun/internal/store"
)

// openStore is a real SQLite store in t's directory, and its file.
func openStore(t *testing.T) (*store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.db")
	st, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}

// newRecorder is a Recorder on host "h1" whose loop stops with t (and
// does not tick within a test unless poll is given).
func newRecorder(t *testing.T, inner execapi.SessionService, rows Rows, poll time.Duration) *Recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if poll <= 0 {
		poll = time.Hour
	}
	r, err := New(ctx, inner, rows, Config{Host: "h1", Poll: poll})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-r.Done()
	})
	return r
}

func as(key string) context.Context { return execapi.WithCaller(context.Background(), key) }

func row(t *testing.T, st *store.Store, id string) store.CodeSession {
	t.Helper()
	c, err := st.CodeSession(context.Background(), store.HashSessionID(id))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantEnded fails t unless err is the owner's *SessionEndedError for reason.
func wantEnded(t *testing.T, what string, err error, reason execapi.SessionEndReason) {
	t.Helper()
	var ended *execapi.SessionEndedError
	if !errors.As(err, &ended) || ended.End.Reason != reason {
		t.Errorf("%s: %v; want the session ended with %s", what, err, reason)
	}
}

// A session's row from open to close: the owner, the worker (handed to the
// wrapped service on every use, whatever the caller's ref said), the
// expiry after a call, the fork's own row, and the end; the id itself is
// nowhere in the database; another caller's use of the id is not found
// and never reaches the wrapped service.
func TestRecordsASessionFromOpenToClose(t *testing.T) {
	st, path := openStore(t)
	fake := newFake("w1")
	r := newRecorder(t, fake, st, 0)
	ctx := as("key_a")

	info, err := r.OpenSession(ctx, execapi.CheckedSession{Runtime: "python3.13"})
	if err != nil {
		t.Fatal(err)
	}
	got := row(t, st, info.ID)
	if got.Owner != "key_a" || got.Worker != "w1" || got.Server != r.Server() || got.Runtime != "python3.13" || !got.Open() ||
		!got.Expires.Equal(time.UnixMilli(info.ExpiresAt.UnixMilli())) {
		t.Errorf("row after open: %+v", got)
	}

	res, err := r.ExecInSession(ctx, execapi.SessionRef{ID: info.ID}, execapi.Checked{Code: "x = 1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ref := fake.lastRef(); ref.Worker != "w1" {
		t.Errorf("the wrapped service was given worker %q, want the row's w1", ref.Worker)
	}
	if got := row(t, st, info.ID); !got.Expires.Equal(time.UnixMilli(res.Session.ExpiresAt.UnixMilli())) {
		t.Errorf("expiry after a call: %s, want %s", got.Expires, res.Session.ExpiresAt)
	}
	if data, err := r.ReadSessionFile(ctx, execapi.SessionRef{ID: info.ID}, "/tmp/a"); err != nil || string(data) != "/tmp/a" {
		t.Errorf("ReadSessionFile = %q, %v", data, err)
	}
	if err := r.WriteSessionFile(ctx, execapi.SessionRef{ID: info.ID}, "/tmp/a", []byte("x")); err != nil {
		t.Errorf("WriteSessionFile: %v", err)
	}

	calls := len(fake.refs)
	other := as("key_b")
	if _, err := r.ExecInSession(other, execapi.SessionRef{ID: info.ID}, execapi.Checked{}, nil); !errors.Is(err, execapi.ErrSessionNotFound) {
		t.Errorf("another caller's exec: %v", err)
	}
	if _, err := r.CloseSession(other, execapi.SessionRef{ID: info.ID}); !errors.Is(err, execapi.ErrSessionNotFound) {
		t.Errorf("another caller's close: %v", err)
	}
	if _, err := r.ReadSessionFile(ctx, execapi.SessionRef{ID: "ses_nonsense"}, "/a"); !errors.Is(err, execapi.ErrSessionNotFound) {
		t.Errorf("an id of another shape: %v", err)
	}
	if len(fake.refs) != calls {
		t.Errorf("uses of ids not the caller's reached the wrapped service")
	}

	child, err := r.ForkSession(ctx, execapi.SessionRef{ID: info.ID})
	if err != nil {
		t.Fatal(err)
	}
	if c := row(t, st, child.ID); c.Owner != "key_a" || !c.Open() {
		t.Errorf("fork's row: %+v", c)
	}

	end, err := r.CloseSession(ctx, execapi.SessionRef{ID: info.ID})
	if err != nil || end.Reason != execapi.EndDeleted {
		t.Fatalf("close = %+v, %v", end, err)
	}
	if got := row(t, st, info.ID); got.Open() || got.EndReason != string(execapi.EndDeleted) {
		t.Errorf("row after close: %+v", got)
	}
	_, err = r.ExecInSession(ctx, execapi.SessionRef{ID: info.ID}, execapi.Checked{}, nil)
	wantEnded(t, "exec after close", err, execapi.EndDeleted)
	if open, _ := st.OpenCodeSessions(context.Background(), "key_a", false); len(open) != 1 || open[0].IDHash != store.HashSessionID(child.ID) {
		t.Errorf("key_a's open rows: %+v", open)
	}

	st.Close() // flush the WAL into the file
	for _, p := range []string{path, path + "-wal"} {
		if data, _ := os.ReadFile(p); strings.Contains(string(data), info.ID) || strings.Contains(string(data), child.ID) {
			t.Errorf("%s holds a session id", filepath.Base(p))
		}
	}
}

// After a restart: the rows of this host's dead servers are ended
// (server_restart) and the owner hears so, not "not found"; a server of
// this host that still runs, one of another host, and sessions a worker
// holds keep theirs.
func TestRestartEndsTheRowsOfDeadServers(t *testing.T) {
	st, _ := openStore(t)
	ctx := context.Background()
	live, err := hostside.InstanceName(os.Getppid())
	if err != nil {
		t.Fatal(err)
	}
	dead := "e999999999_1"
	ids := map[string]string{}
	now := time.Now()
	for name, server := range map[string][2]string{
		"dead": {"h1/" + dead, ""}, "live": {"h1/" + live, ""}, "otherhost": {"h2/" + dead, ""}, "worker": {"h1/" + dead, "w1"},
	} {
		id := execapi.NewSessionID()
		ids[name] = id
		if err := st.InsertCodeSession(ctx, store.CodeSession{IDHash: store.HashSessionID(id), Owner: "key_a", Server: server[0],
			Worker: server[1], Runtime: "bash", Created: now, Expires: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	fake := newFake("")
	r := newRecorder(t, fake, st, 0)
	if got := row(t, st, ids["dead"]); got.EndReason != string(execapi.EndServerRestart) {
		t.Errorf("dead server's row: %+v", got)
	}
	for _, name := range []string{"live", "otherhost", "worker"} {
		if got := row(t, st, ids[name]); !got.Open() {
			t.Errorf("%s row was ended: %+v", name, got)
		}
	}
	_, err = r.ExecInSession(as("key_a"), execapi.SessionRef{ID: ids["dead"]}, execapi.Checked{}, nil)
	wantEnded(t, "the owner's use after a restart", err, execapi.EndServerRestart)
	if err == nil || !strings.Contains(err.Error(), "the server restarted") {
		t.Errorf("the owner is told %v", err)
	}
	if _, err := r.ExecInSession(as("key_b"), execapi.SessionRef{ID: ids["dead"]}, execapi.Checked{}, nil); !errors.Is(err, execapi.ErrSessionNotFound) {
		t.Errorf("another caller's use after a restart: %v", err)
	}
}

// Ends the wrapped service reports are recorded: with a call (memory), as
// an answer to a later use (idle TTL), and a row still open whose session
// the service no longer knows is the owner's ended session, not "not
// found".
func TestEndsTheServiceReportsAreRecorded(t *testing.T) {
	st, _ := openStore(t)
	fake := newFake("")
	r := newRecorder(t, fake, st, 0)
	ctx := as("key_a")
	open := func() string {
		info, err := r.OpenSession(ctx, execapi.CheckedSession{Runtime: "bash"})
		if err != nil {
			t.Fatal(err)
		}
		return info.ID
	}

	mem := open()
	if _, err := r.ExecInSession(ctx, execapi.SessionRef{ID: mem}, execapi.Checked{Code: "exit-memory"}, nil); err != nil {
		t.Fatal(err)
	}
	if got := row(t, st, mem); got.EndReason != string(execapi.EndMemoryLimit) {
		t.Errorf("row after the memory limit: %+v", got)
	}

	idle := open()
	fake.expire(idle)
	_, err := r.ReadSessionFile(ctx, execapi.SessionRef{ID: idle}, "/a")
	wantEnded(t, "read after the idle TTL", err, execapi.EndIdleTTL)
	if got := row(t, st, idle); got.EndReason != string(execapi.EndIdleTTL) {
		t.Errorf("row after the idle TTL: %+v", got)
	}

	lost := open()
	fake.forgetAll()
	err = r.WriteSessionFile(ctx, execapi.SessionRef{ID: lost}, "/a", nil)
	wantEnded(t, "write to a session the service forgot", err, execapi.EndSandboxLost)
	if got := row(t, st, lost); got.EndReason != string(execapi.EndSandboxLost) {
		t.Errorf("row of a session the service forgot: %+v", got)
	}
}

// The operator's end request (the CLI's, the console's) is carried out by
// the poll loop through the wrapped SessionAdmin, and the owner hears
// "the operator ended it".
func TestPollEndsWhatTheOperatorAsked(t *testing.T) {
	st, _ := openStore(t)
	fake := newFake("")
	rows := signalRows{st, make(chan string, 16)}
	r := newRecorder(t, fake, rows, 5*time.Millisecond)
	ctx := as("key_a")
	info, err := r.OpenSession(ctx, execapi.CheckedSession{Runtime: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.RequestCodeSessionEnd(context.Background(), store.HashSessionID(info.ID)); err != nil {
		t.Fatal(err)
	}
	select {
	case hash := <-rows.ended:
		if hash != store.HashSessionID(info.ID) {
			t.Errorf("ended the row %s, want %s's", hash, info.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the poll loop did not end the session the operator asked to end")
	}
	if id := <-fake.endedBy; id != info.ID {
		t.Errorf("the wrapped service ended %s, want %s", id, info.ID)
	}
	if got := row(t, st, info.ID); got.EndReason != string(execapi.EndOperator) {
		t.Errorf("row after the operator's end: %+v", got)
	}
	_, err = r.ExecInSession(ctx, execapi.SessionRef{ID: info.ID}, execapi.Checked{}, nil)
	wantEnded(t, "the owner's use after the operator's end", err, execapi.EndOperator)
}

// signalRows is the store, telling each row it ended.
type signalRows struct {
	*store.Store
	ended chan string
}

func (s signalRows) EndCodeSession(ctx context.Context, idHash, reason string, at time.Time) (bool, error) {
	ok, err := s.Store.EndCodeSession(ctx, idHash, reason, at)
	s.ended <- idHash
	return ok, err
}

// Without a SessionAdmin, the operator's request closes the session as its
// owner would; a request for a row this Recorder does not hold (its
// session ended unseen) ends the row, so that it is not read forever.
func TestPollWithoutAdmin(t *testing.T) {
	st, _ := openStore(t)
	fake := newFake("")
	r := newRecorder(t, sessionsOnly{fake}, st, 0)
	ctx := as("key_a")
	info, err := r.OpenSession(ctx, execapi.CheckedSession{Runtime: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	stale := execapi.NewSessionID()
	now := time.Now()
	if err := st.InsertCodeSession(context.Background(), store.CodeSession{IDHash: store.HashSessionID(stale), Owner: "key_a",
		Server: r.Server(), Runtime: "bash", Created: now, Expires: now}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{info.ID, stale} {
		if _, err := st.RequestCodeSessionEnd(context.Background(), store.HashSessionID(id)); err != nil {
			t.Fatal(err)
		}
	}
	r.poll(context.Background())
	if _, err := fake.get(ctx, execapi.SessionRef{ID: info.ID}); err == nil {
		t.Error("the session the operator asked to end is still open")
	}
	for _, id := range []string{info.ID, stale} {
		if got := row(t, st, id); got.EndReason != string(execapi.EndOperator) {
			t.Errorf("row after the operator's end: %+v", got)
		}
	}
	if _, err := r.AllSessions(context.Background()); err == nil {
		t.Error("AllSessions without an admin answered")
	}
}

// Sessions the service ended by itself, unseen by any call, are found by
// the poll, with the service's own reason.
func TestPollReconcilesEndsNoCallSaw(t *testing.T) {
	st, _ := openStore(t)
	fake := newFake("")
	r := newRecorder(t, fake, st, 0)
	ctx := as("key_a")
	gone, _ := r.OpenSession(ctx, execapi.CheckedSession{Runtime: "bash"})
	kept, _ := r.OpenSession(ctx, execapi.CheckedSession{Runtime: "bash"})
	fake.expire(gone.ID)
	r.poll(context.Background())
	if got := row(t, st, gone.ID); got.EndReason != string(execapi.EndIdleTTL) {
		t.Errorf("row of the expired session: %+v", got)
	}
	if got := row(t, st, kept.ID); !got.Open() {
		t.Errorf("row of the live session: %+v", got)
	}
	if _, err := fake.get(ctx, execapi.SessionRef{ID: kept.ID}); err != nil {
		t.Errorf("the live session was touched: %v", err)
	}
}

// A live session the listing left out (a worker that did not answer) is
// neither closed nor marked ended: only an answer about it ends its row.
func TestPollKeepsASessionTheListingMissed(t *testing.T) {
	st, _ := openStore(t)
	fake := newFake("")
	r := newRecorder(t, fake, st, 0)
	ctx := as("key_a")
	missed, err := r.OpenSession(ctx, execapi.CheckedSession{Runtime: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	fake.unlisted = map[string]bool{missed.ID: true}
	fake.mu.Unlock()
	r.poll(context.Background())
	if got := row(t, st, missed.ID); !got.Open() {
		t.Errorf("the row of a live session the listing missed: %+v", got)
	}
	if _, err := fake.get(ctx, execapi.SessionRef{ID: missed.ID}); err != nil {
		t.Errorf("the live session the listing missed was ended: %v", err)
	}
}

// failingInsert is a store whose rows cannot be written.
type failingInsert struct{ *store.Store }

func (failingInsert) InsertCodeSession(context.Context, store.CodeSession) error {
	return errors.New("disk full")
}

// A session whose row cannot be written is closed and the open fails.
func TestOpenWithoutARowCloses(t *testing.T) {
	st, _ := openStore(t)
	fake := newFake("")
	r := newRecorder(t, fake, failingInsert{st}, 0)
	ctx := as("key_a")
	if _, err := r.OpenSession(ctx, execapi.CheckedSession{Runtime: "bash"}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("open without a row: %v", err)
	}
	if live, _ := fake.ListSessions(ctx); len(live) != 0 {
		t.Errorf("%d sessions left open without a row", len(live))
	}
}

// The operator's EndSession through the Recorder ends the session in the
// wrapped service with the row's worker and records it; the policy and
// the caller's list are the wrapped service's.
func TestOperatorEndSessionIsRecorded(t *testing.T) {
	st, _ := openStore(t)
	fake := newFake("w3")
	r := newRecorder(t, fake, st, 0)
	ctx := as("key_a")
	info, err := r.OpenSession(ctx, execapi.CheckedSession{Runtime: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	if r.SessionPolicy() != fake.SessionPolicy() {
		t.Error("the policy is not the wrapped service's")
	}
	if list, err := r.ListSessions(ctx); err != nil || len(list) != 1 || list[0].ID != info.ID {
		t.Errorf("ListSessions = %+v, %v", list, err)
	}
	end, err := r.EndSession(context.Background(), execapi.SessionRef{ID: info.ID})
	if err != nil || end.Reason != execapi.EndOperator {
		t.Fatalf("EndSession = %+v, %v", end, err)
	}
	if got := row(t, st, info.ID); got.EndReason != string(execapi.EndOperator) {
		t.Errorf("row after the operator's end: %+v", got)
	}
	_, err = r.ReadSessionFile(ctx, execapi.SessionRef{ID: info.ID}, "/a")
	wantEnded(t, "read after the operator's end", err, execapi.EndOperator)
	if _, err := r.EndSession(context.Background(), execapi.SessionRef{ID: execapi.NewSessionID()}); !errors.Is(err, execapi.ErrSessionNotFound) {
		t.Errorf("EndSession of no session: %v", err)
	}
	if _, err := newRecorder(t, sessionsOnly{fake}, st, 0).EndSession(context.Background(), execapi.SessionRef{ID: info.ID}); err == nil {
		t.Error("EndSession without an admin answered")
	}
}
