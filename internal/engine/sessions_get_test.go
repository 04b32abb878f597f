package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// Session is the caller's open session as the list shows it (running
// while a call runs); another caller's and an unknown id are not found;
// the owner's ended one is its end, and so is one that is ending, once its
// teardown is done.
func TestSessionLookup(t *testing.T) {
	running := make(chan struct{})
	b := &sessionBackend{run: func(ctx context.Context, _ *fakeSession, job sandbox.Job) (sandbox.Outcome, error) {
		if strings.Contains(string(job.Files[len(job.Files)-1].Data), "block") {
			close(running)
			<-ctx.Done()
			return sandbox.Outcome{}, ctx.Err()
		}
		return sandbox.Outcome{}, nil
	}}
	e, _ := newSessionEngine(t, b, nil)
	info := openFake(t, e, "a", "bash")
	ref := execapi.SessionRef{ID: info.ID}

	got, err := e.Session(as("a"), ref)
	if err != nil {
		t.Fatal(err)
	}
	list, err := e.ListSessions(as("a"))
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %v, %v", list, err)
	}
	if got.ID != info.ID || got.State != execapi.SessionIdle || got.Runtime != "bash" || !got.ExpiresAt.Equal(list[0].ExpiresAt) {
		t.Errorf("looked up %+v, listed %+v", got, list[0])
	}
	for _, r := range []execapi.SessionRef{ref, {ID: execapi.NewSessionID()}} {
		if _, err := e.Session(as("b"), r); err != execapi.ErrSessionNotFound {
			t.Errorf("%s as another caller: %v", r.ID, err)
		}
	}

	done := make(chan error, 1)
	go func() {
		_, err := execFake(t, e, "a", info.ID, "block")
		done <- err
	}()
	<-running
	if got, err := e.Session(as("a"), ref); err != nil || got.State != execapi.SessionRunning {
		t.Errorf("while a call runs: %+v, %v", got, err)
	}
	if _, err := e.CloseSession(as("a"), ref); err != nil {
		t.Fatal(err)
	}
	<-done
	_, err = e.Session(as("a"), ref)
	wantEnded(t, err, execapi.EndDeleted)

	// Ending: the look-up answers the end once the teardown is done.
	other := openFake(t, e, "a", "bash")
	s, err := e.sessions.lookup(as("a"), other.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if !e.sessions.startEnd(s, execapi.EndMemoryPressure, false) {
		t.Fatal("the idle session did not start ending")
	}
	// Not open any more: never its info, even to a caller who cannot wait.
	gone, cancel := context.WithCancel(as("a"))
	cancel()
	if got, err := e.Session(gone, execapi.SessionRef{ID: other.ID}); !errors.Is(err, context.Canceled) {
		t.Errorf("an ending session's look-up: %+v, %v; want it to wait for the end", got, err)
	}
	looked := make(chan error, 1)
	go func() {
		_, err := e.Session(as("a"), execapi.SessionRef{ID: other.ID})
		looked <- err
	}()
	e.sessions.finishEnd(s)
	wantEnded(t, <-looked, execapi.EndMemoryPressure)
}

// Sessions off, the look-up refuses as every session method does.
func TestSessionLookupWithSessionsOff(t *testing.T) {
	e := newFakeEngine(t, &sessionBackend{}, nil)
	if _, err := e.Session(as("k"), execapi.SessionRef{ID: execapi.NewSessionID()}); !errors.Is(err, errSessionsOff) {
		t.Fatalf("look-up with sessions off: %v", err)
	}
}
