package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/cluster/frontend"
	"github.com/scratchrun/scratchrun/internal/cluster/worker"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/testenv/natsserver"
)

// withSessions gives a worker's config the fake sessions s.
func withSessions(s *fakeSessions) func(*worker.Config) {
	return func(c *worker.Config) { c.Sessions = s }
}

// sessionFrontend is a front end with sessions on.
func sessionFrontend(t *testing.T, urls []string) *frontend.Frontend {
	t.Helper()
	sp := execapi.DefaultSessionPolicy()
	sp.Enabled = true
	return startFrontend(t, urls, func(c *frontend.Config) { c.Sessions = sp })
}

// as is a context of caller key.
func as(key string) context.Context { return execapi.WithCaller(context.Background(), key) }

// openSession opens a bash session through f as caller key.
func openSession(t *testing.T, f *frontend.Frontend, key string) execapi.SessionInfo {
	t.Helper()
	c, err := f.SessionPolicy().ValidateSession(f.Policy(), execapi.SessionRequest{Runtime: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	info, err := f.OpenSession(as(key), c)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return info
}

// call is a checked call of code in the session.
func call(t *testing.T, f *frontend.Frontend, info execapi.SessionInfo, code string) execapi.Checked {
	t.Helper()
	c, err := f.Policy().ValidateInSession(execapi.Request{Code: code}, info, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func refOf(info execapi.SessionInfo) execapi.SessionRef {
	return execapi.SessionRef{ID: info.ID, Worker: info.Worker}
}

// A session opens on a worker that holds sessions (never on one that
// does not), and every later operation reaches it there: a call with its
// events, binary files both ways, a fork on the same worker, the caller's
// listing, the close, and the ended error after it. Another caller is told
// the session does not exist.
func TestSessionOperationsReachTheirWorker(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	s1, s2 := newFakeSessions(), newFakeSessions()
	startWorker(t, ns.URLs(), "w1", newEngine("bash"), withSessions(s1))
	startWorker(t, ns.URLs(), "w2", newEngine("bash"), withSessions(s2))
	plain := newEngine("bash")
	plain.free.Store(100) // preferred, were it placed on by free room alone
	startWorker(t, ns.URLs(), "w3", plain, nil)
	f := sessionFrontend(t, ns.URLs())
	waitWorkers(t, f, "w1", "w2", "w3")

	info := openSession(t, f, "key_a")
	wid, instance := cluster.ParseSessionWorker(info.Worker)
	if wid != "w1" && wid != "w2" || instance == "" {
		t.Fatalf("the session's worker is %q", info.Worker)
	}
	holder := map[string]*fakeSessions{"w1": s1, "w2": s2}[wid]
	if holder.open() != 1 {
		t.Fatalf("the worker %s holds %d sessions", wid, holder.open())
	}
	if info.Owner != "" {
		t.Errorf("a caller's info carries its owner %q", info.Owner)
	}
	ref := refOf(info)

	var mu sync.Mutex
	var streamed []string
	res, err := f.ExecInSession(as("key_a"), ref, call(t, f, info, "echo hi"), func(ev execapi.Event) {
		mu.Lock()
		defer mu.Unlock()
		streamed = append(streamed, string(ev.Data))
	})
	if err != nil || res.Stdout != "echo hi" || res.Session.ID != info.ID || res.StatePurged {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	if res.Worker != wid {
		t.Errorf("the result names worker %q", res.Worker)
	}
	mu.Lock()
	if strings.Join(streamed, "") != "echo hi" {
		t.Errorf("events: %q", streamed)
	}
	mu.Unlock()

	data := []byte{0, 1, 2, 0xff, '\n', 0}
	if err := f.WriteSessionFile(as("key_a"), ref, "/code/data.bin", data); err != nil {
		t.Fatal(err)
	}
	got, err := f.ReadSessionFile(as("key_a"), ref, "/code/data.bin")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %v, %v", got, err)
	}
	if _, err := f.ReadSessionFile(as("key_a"), ref, "/code/none"); !errors.Is(err, execapi.ErrSessionFileNotFound) {
		t.Errorf("a missing file: %v", err)
	}
	if err := f.WriteSessionFile(as("key_a"), ref, "/code/big", make([]byte, 2<<20)); err != nil {
		t.Fatal(err)
	}
	var big *execapi.FileTooLargeError
	if _, err := f.ReadSessionFile(as("key_a"), ref, "/code/big"); !errors.As(err, &big) || big.Limit != 1<<20 {
		t.Errorf("a file above the read limit: %v", err)
	}

	child, err := f.ForkSession(as("key_a"), ref)
	if err != nil || child.ForkedFrom != info.ID || child.Worker != info.Worker {
		t.Fatalf("fork: %+v, %v", child, err)
	}
	if got, err := f.ReadSessionFile(as("key_a"), refOf(child), "/code/data.bin"); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the fork's copy: %v, %v", got, err)
	}

	list, err := f.ListSessions(as("key_a"))
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	for _, s := range list {
		if s.Worker != info.Worker {
			t.Errorf("listed on %q", s.Worker)
		}
	}
	if list, _ := f.ListSessions(as("key_b")); len(list) != 0 {
		t.Errorf("another caller lists %d sessions", len(list))
	}
	all, err := f.AllSessions(context.Background())
	if err != nil || len(all) != 2 || all[0].Owner != "key_a" {
		t.Fatalf("the operator's list: %+v, %v", all, err)
	}

	if _, err := f.ExecInSession(as("key_b"), ref, call(t, f, info, "x"), nil); !errors.Is(err, execapi.ErrSessionNotFound) {
		t.Errorf("another caller's call: %v", err)
	}
	if _, err := f.ReadSessionFile(as("key_b"), ref, "/code/data.bin"); !errors.Is(err, execapi.ErrSessionNotFound) {
		t.Errorf("another caller's read: %v", err)
	}
	if _, err := f.ExecInSession(as("key_a"), execapi.SessionRef{ID: info.ID}, call(t, f, info, "x"), nil); !errors.Is(err, execapi.ErrSessionNotFound) {
		t.Errorf("a ref without its worker: %v", err)
	}

	end, err := f.CloseSession(as("key_a"), ref)
	if err != nil || end.Reason != execapi.EndDeleted || !end.StatePurged {
		t.Fatalf("close: %+v, %v", end, err)
	}
	var ended *execapi.SessionEndedError
	if _, err := f.ExecInSession(as("key_a"), ref, call(t, f, info, "x"), nil); !errors.As(err, &ended) || ended.End.Reason != execapi.EndDeleted {
		t.Errorf("a call after the close: %v", err)
	}
	if end, err := f.EndSession(context.Background(), refOf(child)); err != nil || end.Reason != execapi.EndOperator {
		t.Errorf("the operator's end: %+v, %v", end, err)
	}
	if holder.open() != 0 {
		t.Errorf("%d sessions left open", holder.open())
	}
	if len(plain.Calls()) != 0 {
		t.Errorf("the worker without sessions got %d calls", len(plain.Calls()))
	}
}

// A session whose worker is gone (its connection dropped at once, as with
// kill -9, and its registration expired) is lost: the call says so and
// runs nowhere else; a new process of the same worker id does not stand
// in for it.
func TestSessionLostWithItsWorker(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	doomed, other := newFakeSessions(), newFakeSessions()
	_, conn := startWorker(t, ns.URLs(), "w1", newEngine("bash"), withSessions(doomed))
	f := sessionFrontend(t, ns.URLs())
	waitWorkers(t, f, "w1")
	info := openSession(t, f, "key_a")
	startWorker(t, ns.URLs(), "w2", newEngine("bash"), withSessions(other))
	waitWorkers(t, f, "w1", "w2")

	conn.Close()
	waitWorkers(t, f, "w2")
	var lost *execapi.SessionLostError
	_, err := f.ExecInSession(as("key_a"), refOf(info), call(t, f, info, "x"), nil)
	if !errors.As(err, &lost) || lost.Worker != "w1" || lost.MayHaveRun {
		t.Fatalf("a call in a session of a gone worker: %v", err)
	}
	if !strings.Contains(err.Error(), "the session was lost with its worker") {
		t.Errorf("wording: %q", err)
	}
	if _, err := f.ReadSessionFile(as("key_a"), refOf(info), "/code/x"); !errors.As(err, &lost) {
		t.Errorf("a read: %v", err)
	}
	if _, err := f.CloseSession(as("key_a"), refOf(info)); !errors.As(err, &lost) {
		t.Errorf("a close: %v", err)
	}

	// The same id, a new process: it holds none of the old one's sessions.
	startWorker(t, ns.URLs(), "w1", newEngine("bash"), withSessions(newFakeSessions()))
	waitWorkers(t, f, "w1", "w2")
	if _, err := f.ExecInSession(as("key_a"), refOf(info), call(t, f, info, "x"), nil); !errors.As(err, &lost) {
		t.Errorf("a call after the worker restarted: %v", err)
	}
	if n := other.calls(); n != 0 {
		t.Errorf("another worker ran %d calls", n)
	}
}

// A worker lost while a call runs in a session: the caller is told the
// session was lost and that the code may have run.
func TestSessionLostDuringACall(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	s := newFakeSessions()
	s.hold = make(chan struct{})
	defer close(s.hold)
	_, conn := startWorker(t, ns.URLs(), "w1", newEngine("bash"), withSessions(s))
	f := sessionFrontend(t, ns.URLs())
	waitWorkers(t, f, "w1")
	info := openSession(t, f, "key_a")
	done := make(chan error, 1)
	go func() {
		_, err := f.ExecInSession(as("key_a"), refOf(info), call(t, f, info, "sleep"), nil)
		done <- err
	}()
	waitFor(t, "the call to run", func() bool { return s.calls() == 1 })
	conn.Close()
	var lost *execapi.SessionLostError
	if err := <-done; !errors.As(err, &lost) || !lost.MayHaveRun {
		t.Fatalf("the call on a lost worker: %v", err)
	}
}

// A worker that stops ends its sessions (their sandboxes go with it) and
// its last registration names them, so that the next call of each is told
// it ended with the server, not that it was lost; another caller still
// learns nothing.
func TestStoppingWorkerEndsItsSessions(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	s := newFakeSessions()
	w, _ := startWorker(t, ns.URLs(), "w1", newEngine("bash"), withSessions(s))
	f := sessionFrontend(t, ns.URLs())
	waitWorkers(t, f, "w1")
	a, b := openSession(t, f, "key_a"), openSession(t, f, "key_a")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.open(); n != 0 {
		t.Fatalf("%d sessions outlived their worker", n)
	}
	waitWorkers(t, f)
	for _, info := range []execapi.SessionInfo{a, b} {
		var ended *execapi.SessionEndedError
		waitFor(t, "the front end to hear of the end", func() bool {
			_, err := f.ExecInSession(as("key_a"), refOf(info), call(t, f, info, "x"), nil)
			return errors.As(err, &ended)
		})
		if ended.End.Reason != execapi.EndServerShutdown || !ended.End.StatePurged {
			t.Errorf("the end: %+v", ended.End)
		}
	}
	var lost *execapi.SessionLostError
	if _, err := f.ExecInSession(as("key_b"), refOf(a), call(t, f, a, "x"), nil); !errors.As(err, &lost) {
		t.Errorf("another caller's call: %v (want it told no more than of any gone worker)", err)
	}
}

// A file above the front end's policy is refused before it is sent.
func TestSessionFileBoundedAtTheFrontEnd(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	s := newFakeSessions()
	startWorker(t, ns.URLs(), "w1", newEngine("bash"), withSessions(s))
	f := sessionFrontend(t, ns.URLs())
	waitWorkers(t, f, "w1")
	info := openSession(t, f, "key_a")
	err := f.WriteSessionFile(as("key_a"), refOf(info), "/code/x", make([]byte, f.Policy().MaxFileBytes+1))
	if !execapi.IsValidation(err) {
		t.Fatalf("an oversized file: %v", err)
	}
}

// A registration that lists more ended sessions than any worker sends is
// refused.
func TestRegistrationBoundsEndedSessions(t *testing.T) {
	r := cluster.Registration{ID: "w1", EndedSessions: make([]cluster.EndedSession, cluster.MaxEndedSessions+1)}
	data, _ := json.Marshal(r)
	if _, err := cluster.DecodeRegistration("w1", data); err == nil {
		t.Fatal("a registration with too many ended sessions was taken")
	}
	r.EndedSessions = r.EndedSessions[:cluster.MaxEndedSessions]
	data, _ = json.Marshal(r)
	if _, err := cluster.DecodeRegistration("w1", data); err != nil {
		t.Fatal(err)
	}
}

// A worker holds an open to its own bounds, whatever the front end's: a
// front end that lets a session ask for more memory than the worker's
// sessions may have gets the worker's refusal, and nothing opens.
func TestWorkerHoldsAnOpenToItsOwnBounds(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	s := newFakeSessions() // at most 1024 MB a session
	startWorker(t, ns.URLs(), "w1", newEngine("bash"), withSessions(s))
	sp := execapi.DefaultSessionPolicy()
	sp.Enabled, sp.MaxMemoryMB = true, 4096
	f := startFrontend(t, ns.URLs(), func(c *frontend.Config) { c.Sessions = sp })
	waitWorkers(t, f, "w1")
	c, err := f.SessionPolicy().ValidateSession(f.Policy(), execapi.SessionRequest{Runtime: "bash", Limits: execapi.Limits{MemoryMB: 2048}})
	if err != nil {
		t.Fatal(err)
	}
	var invalid *execapi.ValidationError
	if _, err := f.OpenSession(as("key_a"), c); !errors.As(err, &invalid) || invalid.Field != "limits.memory_mb" {
		t.Fatalf("an open above the worker's bounds: %v", err)
	}
	if s.open() != 0 {
		t.Errorf("%d sessions opened", s.open())
	}
}

// A worker holds a call in a session to its own policy too: a timeout
// above the worker's maximum, which a front end let through, is refused
// there and nothing runs.
func TestWorkerHoldsASessionCallToItsOwnPolicy(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	s := newFakeSessions()
	startWorker(t, ns.URLs(), "w1", newEngine("bash"), withSessions(s))
	sp := execapi.DefaultSessionPolicy()
	sp.Enabled = true
	p := execapi.DefaultPolicy()
	p.MaxTimeout *= 4
	f := startFrontend(t, ns.URLs(), func(c *frontend.Config) { c.Sessions, c.Policy = sp, p })
	waitWorkers(t, f, "w1")
	info := openSession(t, f, "key_a")
	c, err := p.ValidateInSession(execapi.Request{Code: "x", Limits: execapi.Limits{TimeoutMS: int(p.MaxTimeout.Milliseconds())}}, info, nil)
	if err != nil {
		t.Fatal(err)
	}
	var invalid *execapi.ValidationError
	if _, err := f.ExecInSession(as("key_a"), refOf(info), c, nil); !errors.As(err, &invalid) || invalid.Field != "limits.timeout_ms" {
		t.Fatalf("a call above the worker's timeout: %v", err)
	}
	if n := s.calls(); n != 0 {
		t.Errorf("%d calls ran", n)
	}
}

// A session's worker that is registered and live but takes no offer
// within the ready wait (busy, slow) is no lost worker: the call is a 503
// refusal to retry, nothing ran, and the session is not called lost (which
// would end its row for good while it runs on).
func TestSessionOfASilentWorkerIsNotLost(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	s := newFakeSessions()
	_, conn := startWorker(t, ns.URLs(), "w1", newEngine("bash"), withSessions(s))
	f := sessionFrontend(t, ns.URLs())
	waitWorkers(t, f, "w1")
	info := openSession(t, f, "key_a")

	// w1 falls silent but stays registered: its last registration is
	// published again from another connection, and its call subjects are
	// held by a subscriber that never answers.
	mute := connect(t, ns.URLs(), "mute")
	js, err := jetstream.New(mute)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(timeoutCtx(t, 10*time.Second), cluster.RegistryBucket)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kv.Get(timeoutCtx(t, 10*time.Second), "w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mute.Subscribe(cluster.CallPrefix+".w1.>", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if _, err := kv.Put(timeoutCtx(t, 10*time.Second), "w1", entry.Value()); err != nil {
		t.Fatal(err)
	}
	if err := mute.Flush(); err != nil {
		t.Fatal(err)
	}
	_, err = f.ExecInSession(as("key_a"), refOf(info), call(t, f, info, "x"), nil)
	var refusal *execapi.Refusal
	var lost *execapi.SessionLostError
	if errors.As(err, &lost) || !errors.As(err, &refusal) || refusal.Reason != execapi.RefusedSessionWorkerUnanswered || refusal.RetryAfter <= 0 {
		t.Fatalf("a call in a session of a registered, silent worker: %v", err)
	}
}
