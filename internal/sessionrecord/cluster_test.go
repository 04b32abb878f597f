package sessionrecord

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// newClusterRecorder is a front end's Recorder (Cluster) of server
// instance inst on host "h1", polling every poll (an hour when 0).
func newClusterRecorder(t *testing.T, inner execapi.SessionService, rows Rows, inst string, poll time.Duration) *Recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if poll <= 0 {
		poll = time.Hour
	}
	r, err := New(ctx, inner, rows, Config{Host: "h1", Poll: poll, Cluster: true, instance: inst})
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

// The operator's end of a cluster session reaches it from a front end
// that did not open it (the one that did may have stopped): that one
// holds no id, and finds it by its hash in the workers' listing.
func TestClusterEndRequestReachesAnyFrontEnd(t *testing.T) {
	st, _ := openStore(t)
	fake := newFake("worker-1/inst-1")
	opener := newClusterRecorder(t, fake, st, "1", 0)
	info, err := opener.OpenSession(as("key_a"), execapi.CheckedSession{Runtime: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	rows := signalRows{st, make(chan string, 16)}
	other := newClusterRecorder(t, fake, rows, "2", 5*time.Millisecond)
	if other.Server() == opener.Server() {
		t.Fatalf("both front ends are %s", other.Server())
	}
	if _, err := st.RequestCodeSessionEnd(context.Background(), store.HashSessionID(info.ID)); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-fake.endedBy:
		if id != info.ID {
			t.Errorf("the workers were asked to end %s, want %s", id, info.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no front end but the one that opened it ends a session the operator asked to end")
	}
	<-rows.ended
	if got := row(t, st, info.ID); got.EndReason != string(execapi.EndOperator) {
		t.Errorf("row after the operator's end: %+v", got)
	}
	if ref := fake.lastRef(); ref.Worker != "worker-1/inst-1" {
		t.Errorf("the end was sent to worker %q, want the row's", ref.Worker)
	}
	_, err = opener.ExecInSession(as("key_a"), execapi.SessionRef{ID: info.ID}, execapi.Checked{}, nil)
	wantEnded(t, "the owner's use after the operator's end", err, execapi.EndOperator)
}

// A session seen lost with its worker is no longer open in the rows (the
// operator's listings), and every later use of it is still "lost with its
// worker", without asking the cluster again.
func TestLostSessionEndsItsRow(t *testing.T) {
	st, _ := openStore(t)
	fake := newFake("worker-1/inst-1")
	r := newClusterRecorder(t, fake, st, "1", 0)
	ctx := as("key_a")
	info, err := r.OpenSession(ctx, execapi.CheckedSession{Runtime: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	fake.lost = true
	fake.mu.Unlock()
	ref := execapi.SessionRef{ID: info.ID}
	var lost *execapi.SessionLostError
	if _, err := r.ExecInSession(ctx, ref, execapi.Checked{}, nil); !errors.As(err, &lost) {
		t.Fatalf("a call in a lost session: %v", err)
	}
	if got := row(t, st, info.ID); got.Open() || got.EndReason != reasonWorkerLost {
		t.Errorf("row of a lost session: %+v", got)
	}
	open, err := st.OpenCodeSessions(context.Background(), "", true)
	if err != nil || len(open) != 0 {
		t.Errorf("open rows after the loss: %+v, %v", open, err)
	}
	asked := len(fake.refs)
	if _, err := r.ReadSessionFile(ctx, ref, "/a"); !errors.As(err, &lost) {
		t.Errorf("a read in a lost session after its row ended: %v", err)
	}
	if _, err := r.CloseSession(ctx, ref); !errors.As(err, &lost) {
		t.Errorf("a close of a lost session after its row ended: %v", err)
	}
	if len(fake.refs) != asked {
		t.Errorf("the cluster was asked again about a session its row says is lost")
	}
	if _, err := r.ExecInSession(as("key_b"), ref, execapi.Checked{}, nil); !errors.Is(err, execapi.ErrSessionNotFound) {
		t.Errorf("another caller's use of the lost session's id: %v", err)
	}
}

// An operator's end of a session the cluster's listing left out (its
// worker did not answer) stays pending: the row is not marked ended while
// the session may run on, and the end is carried out once the session is
// listed again.
func TestClusterEndRequestWaitsForAListingThatHasIt(t *testing.T) {
	st, _ := openStore(t)
	fake := newFake("worker-1/inst-1")
	opener := newClusterRecorder(t, fake, st, "1", 0)
	info, err := opener.OpenSession(as("key_a"), execapi.CheckedSession{Runtime: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	fake.unlisted = map[string]bool{info.ID: true}
	fake.mu.Unlock()
	other := newClusterRecorder(t, fake, st, "2", 0)
	if _, err := st.RequestCodeSessionEnd(context.Background(), store.HashSessionID(info.ID)); err != nil {
		t.Fatal(err)
	}
	other.poll(context.Background())
	if got := row(t, st, info.ID); !got.Open() {
		t.Fatalf("the row of a session the listing missed was ended: %+v", got)
	}
	if _, err := fake.get(as("key_a"), execapi.SessionRef{ID: info.ID}); err != nil {
		t.Fatalf("the session the listing missed was ended: %v", err)
	}
	fake.mu.Lock()
	fake.unlisted = nil
	fake.mu.Unlock()
	other.poll(context.Background())
	if got := row(t, st, info.ID); got.EndReason != string(execapi.EndOperator) {
		t.Errorf("the row once the listing has the session: %+v", got)
	}
	if _, err := fake.get(as("key_a"), execapi.SessionRef{ID: info.ID}); err == nil {
		t.Error("the session is still open after the operator's end was carried out")
	}
}
