package sessionrecord

import (
	"errors"
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Session asks the wrapped service only for the caller's open row, on the
// row's worker; an unknown id, another caller's and the owner's ended one
// are answered from the rows alone. A row still open whose session the
// wrapped service no longer knows is ended (sandbox_lost), and the owner
// is told so.
func TestSessionLookupFromRows(t *testing.T) {
	st, _ := openStore(t)
	fake := newFake("w1")
	r := newRecorder(t, fake, st, 0)
	ctx := as("key_a")
	info, err := r.OpenSession(ctx, execapi.CheckedSession{Runtime: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	ref := execapi.SessionRef{ID: info.ID}

	got, err := r.Session(ctx, ref)
	if err != nil || got.ID != info.ID || got.Worker != "w1" {
		t.Fatalf("the owner's look-up: %+v, %v", got, err)
	}
	if last := fake.lastRef(); last.Worker != "w1" {
		t.Errorf("the wrapped service was given worker %q, want the row's w1", last.Worker)
	}

	asked := len(fake.refs)
	for what, err := range map[string]error{
		"another caller's":       lookupErr(r.Session(as("key_b"), ref)),
		"an unknown id":          lookupErr(r.Session(ctx, execapi.SessionRef{ID: execapi.NewSessionID()})),
		"an id of no id's shape": lookupErr(r.Session(ctx, execapi.SessionRef{ID: "ses_nonsense"})),
	} {
		if !errors.Is(err, execapi.ErrSessionNotFound) {
			t.Errorf("%s: %v, want not found", what, err)
		}
	}
	if _, err := r.CloseSession(ctx, ref); err != nil {
		t.Fatal(err)
	}
	asked++ // the close
	_, err = r.Session(ctx, ref)
	wantEnded(t, "the owner's closed session", err, execapi.EndDeleted)
	if len(fake.refs) != asked {
		t.Errorf("look-ups the rows answer reached the wrapped service (%d calls, want %d)", len(fake.refs), asked)
	}

	// Gone from the wrapped service while its row is open.
	vanished, err := r.OpenSession(ctx, execapi.CheckedSession{Runtime: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	delete(fake.sessions, vanished.ID)
	fake.mu.Unlock()
	_, err = r.Session(ctx, execapi.SessionRef{ID: vanished.ID})
	wantEnded(t, "a session its service no longer knows", err, execapi.EndSandboxLost)
	if got := row(t, st, vanished.ID); got.Open() || got.EndReason != string(execapi.EndSandboxLost) {
		t.Errorf("its row: %+v, want ended sandbox_lost", got)
	}
}

// lookupErr is a look-up's error.
func lookupErr(_ execapi.SessionInfo, err error) error { return err }
