package sessionrecord

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// In a cluster the key's maximum holds across front ends and workers: the
// shared rows count a key's sessions, which no one worker can. Opens and
// forks both count; another key is not held back; a closed session frees
// its place.
func TestClusterKeyMaximumHoldsAcrossFrontEnds(t *testing.T) {
	st, _ := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var fronts [2]*Recorder
	for i, worker := range []string{"w1@a", "w2@b"} {
		r, err := New(ctx, newFake(worker), st, Config{Host: "h1", Poll: time.Hour, Cluster: true})
		if err != nil {
			t.Fatal(err)
		}
		fronts[i] = r
		defer func() { cancel(); <-r.Done() }()
	}
	perKey := execapi.DefaultSessionPolicy().PerKey
	a := as("key_a")
	var first execapi.SessionInfo
	for i := range perKey {
		info, err := fronts[i%2].OpenSession(a, execapi.CheckedSession{Runtime: "bash"})
		if err != nil {
			t.Fatalf("open %d of %d: %v", i+1, perKey, err)
		}
		if i == 0 {
			first = info
		}
	}
	var refusal *execapi.Refusal
	for i, r := range fronts {
		if _, err := r.OpenSession(a, execapi.CheckedSession{Runtime: "bash"}); !errors.As(err, &refusal) || refusal.Reason != execapi.RefusedKeySessions {
			t.Errorf("front end %d: an open past the key's maximum: %v", i+1, err)
		}
	}
	if _, err := fronts[0].ForkSession(a, execapi.SessionRef{ID: first.ID}); !errors.As(err, &refusal) || refusal.Reason != execapi.RefusedKeySessions {
		t.Errorf("a fork past the key's maximum: %v", err)
	}
	if _, err := fronts[1].OpenSession(as("key_b"), execapi.CheckedSession{Runtime: "bash"}); err != nil {
		t.Errorf("another key held back: %v", err)
	}
	if _, err := fronts[0].CloseSession(a, execapi.SessionRef{ID: first.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := fronts[1].OpenSession(a, execapi.CheckedSession{Runtime: "bash"}); err != nil {
		t.Errorf("an open after a close freed a place: %v", err)
	}
	// A row long past its expiry (a front end gone before it recorded the
	// end) holds no place.
	stale, err := st.OpenCodeSessions(context.Background(), "key_a", false)
	if err != nil || len(stale) == 0 {
		t.Fatal(stale, err)
	}
	if err := st.TouchCodeSession(context.Background(), stale[0].IDHash, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := fronts[0].OpenSession(a, execapi.CheckedSession{Runtime: "bash"}); err != nil {
		t.Errorf("an open beside a row an hour past its expiry: %v", err)
	}
	open, _ := st.OpenCodeSessions(context.Background(), "key_a", false)
	if len(open) != perKey+1 {
		t.Errorf("key_a has %d open rows, want its maximum %d and the stale one (a refused open left no row)", len(open), perKey)
	}
}
