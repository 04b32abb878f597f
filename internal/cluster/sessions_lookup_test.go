package cluster_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/testenv/natsserver"
)

// A look-up of one session (Session) asks only the worker that holds it
// and answers its info with the worker that routes it; another caller, a
// ref without its worker and an ended session get the contract's errors,
// and a session of a gone worker is lost.
func TestSessionLookupAsksItsWorkerOnly(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	s1, s2 := newFakeSessions(), newFakeSessions()
	_, conn1 := startWorker(t, ns.URLs(), "w1", newEngine("bash"), withSessions(s1))
	_, conn2 := startWorker(t, ns.URLs(), "w2", newEngine("bash"), withSessions(s2))
	conns := map[string]*nats.Conn{"w1": conn1, "w2": conn2}
	f := sessionFrontend(t, ns.URLs())
	waitWorkers(t, f, "w1", "w2")

	info := openSession(t, f, "key_a")
	wid, _ := cluster.ParseSessionWorker(info.Worker)
	holder, other := s1, s2
	if wid == "w2" {
		holder, other = s2, s1
	}
	got, err := f.Session(as("key_a"), refOf(info))
	if err != nil || got.ID != info.ID || got.Worker != info.Worker || got.Runtime != "bash" || got.Owner != "" {
		t.Fatalf("look-up: %+v, %v", got, err)
	}
	if holder.lookups() != 1 || other.lookups() != 0 {
		t.Errorf("the look-up asked the holder %d times and the other worker %d times, want 1 and 0", holder.lookups(), other.lookups())
	}

	if _, err := f.Session(as("key_b"), refOf(info)); !errors.Is(err, execapi.ErrSessionNotFound) {
		t.Errorf("another caller's look-up: %v", err)
	}
	if _, err := f.Session(as("key_a"), execapi.SessionRef{ID: info.ID}); !errors.Is(err, execapi.ErrSessionNotFound) {
		t.Errorf("a ref without its worker: %v", err)
	}
	if _, err := f.CloseSession(as("key_a"), refOf(info)); err != nil {
		t.Fatal(err)
	}
	var ended *execapi.SessionEndedError
	if _, err := f.Session(as("key_a"), refOf(info)); !errors.As(err, &ended) || ended.End.Reason != execapi.EndDeleted {
		t.Errorf("a closed session's look-up: %v", err)
	}

	kept := openSession(t, f, "key_a")
	gone, _ := cluster.ParseSessionWorker(kept.Worker)
	conns[gone].Close()
	waitWorkers(t, f, map[string]string{"w1": "w2", "w2": "w1"}[gone])
	var lost *execapi.SessionLostError
	if _, err := f.Session(as("key_a"), refOf(kept)); !errors.As(err, &lost) {
		t.Errorf("a look-up of a session of a gone worker: %v", err)
	}
}
