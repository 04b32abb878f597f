package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/admission"
	"github.com/scratchrun/scratchrun/internal/engine/kernel"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// Sessions off, the engine makes no sandbox for them and says they are
// off: nothing a front end could offer.
func TestSessionsOffRefuseAndCreateNothing(t *testing.T) {
	b := &sessionBackend{}
	e := newFakeEngine(t, b, nil)
	if e.SessionPolicy().Enabled {
		t.Fatal("sessions are on by default")
	}
	c, err := execapi.DefaultSessionPolicy().ValidateSession(e.Policy(), execapi.SessionRequest{Runtime: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.OpenSession(as("k"), c); !errors.Is(err, errSessionsOff) {
		t.Fatalf("open with sessions off: %v", err)
	}
	if _, err := e.ListSessions(as("k")); !errors.Is(err, errSessionsOff) {
		t.Fatalf("list with sessions off: %v", err)
	}
	if _, err := e.CloseSession(as("k"), execapi.SessionRef{ID: execapi.NewSessionID()}); !errors.Is(err, errSessionsOff) {
		t.Fatalf("close with sessions off: %v", err)
	}
	if created, _, _ := b.counts(); created != 0 {
		t.Fatalf("%d sandboxes created with sessions off", created)
	}
}

// A python session's calls go to its kernel, each in a file of its own;
// the first starts it, the next keep it; bash calls run in the wrapper;
// files persist; closing purges and the owner then learns why.
func TestSessionCallsGoToKernelAndPersist(t *testing.T) {
	b := &sessionBackend{}
	e, _ := newSessionEngine(t, b, nil)
	info := openFake(t, e, "k", "python3.13")
	if info.Interpreter != execapi.InterpreterPython || info.Owner != "k" || !execapi.IsSessionID(info.ID) || info.State != execapi.SessionIdle {
		t.Fatalf("info %+v", info)
	}
	if cfg := b.configs[0]; !cfg.Session || cfg.Prestart != nil || cfg.MemoryBytes != int64(info.Limits.MemoryMB)<<20 {
		t.Fatalf("sandbox config %+v", cfg)
	}
	var said []string
	for i, code := range []string{"v = 21", "v * 2"} {
		res, err := execFake(t, e, "k", info.ID, code)
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 || res.Stdout != code || res.StatePurged || res.Session.Ended != nil || res.Session.ID != info.ID {
			t.Fatalf("call %d: %+v", i, res)
		}
		said = append(said, res.Session.Interpreter)
	}
	if !slices.Equal(said, []string{execapi.InterpreterStarted, execapi.InterpreterKept}) {
		t.Fatalf("interpreter %v", said)
	}
	s := b.liveOne(t)
	names := map[string]bool{}
	for i, job := range s.jobs {
		// call-N-RANDOM.py: numbered, and not known before the call.
		want := job.Files[len(job.Files)-1].Path
		rest, ok := strings.CutPrefix(want, "/code/call-"+string(rune('1'+i))+"-")
		if !ok || len(rest) != len("12345678.py") || !strings.HasSuffix(rest, ".py") || names[rest] {
			t.Fatalf("job %d's code file %q", i, want)
		}
		names[rest] = true
		r := job.Resident
		if r == nil || r.Key != "python3.13" || r.Interrupt != 2*time.Second {
			t.Fatalf("job %d: %+v", i, job)
		}
		if string(r.Request) != string(kernel.Request(workDir, want, job.Env)) {
			t.Fatalf("job %d request %q", i, r.Request)
		}
		if !slices.Contains(r.Argv, kernelProgram(t)) {
			t.Fatalf("job %d kernel argv does not carry the kernel: %q", i, r.Argv)
		}
	}
	if err := e.WriteSessionFile(as("k"), execapi.SessionRef{ID: info.ID}, "/tmp/x", []byte("data")); err != nil {
		t.Fatal(err)
	}
	got, err := e.ReadSessionFile(as("k"), execapi.SessionRef{ID: info.ID}, "/tmp/x")
	if err != nil || string(got) != "data" {
		t.Fatalf("read back %q, %v", got, err)
	}
	if _, err := e.ReadSessionFile(as("k"), execapi.SessionRef{ID: info.ID}, "/tmp/none"); !errors.Is(err, execapi.ErrSessionFileNotFound) {
		t.Fatalf("missing file: %v", err)
	}
	end, err := e.CloseSession(as("k"), execapi.SessionRef{ID: info.ID})
	if err != nil || end.Reason != execapi.EndDeleted || !end.StatePurged {
		t.Fatalf("close: %+v, %v", end, err)
	}
	if _, live, _ := b.counts(); live != 0 {
		t.Fatalf("%d sandboxes left after close", live)
	}
	_, err = execFake(t, e, "k", info.ID, "v")
	wantEnded(t, err, execapi.EndDeleted)
	if _, err := execFake(t, e, "other", info.ID, "v"); !errors.Is(err, execapi.ErrSessionNotFound) {
		t.Fatalf("another caller after the end: %v", err)
	}
}

// kernelProgram is the python kernel's source, as its argv carries it.
func kernelProgram(t *testing.T) string {
	argv, err := kernel.Command("python", []string{"python", "-c", "{bootstrap}"})
	if err != nil {
		t.Fatal(err)
	}
	return argv[2]
}

// liveOne is the one live sandbox of b.
func (b *sessionBackend) liveOne(t *testing.T) *fakeSession {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.live) != 1 {
		t.Fatalf("%d live sandboxes, want 1", len(b.live))
	}
	for s := range b.live {
		return s
	}
	return nil
}

// Bash calls run in the wrapper that keeps the exported variables and the
// directory; runtimes without session state run as plain calls do.
func TestSessionBashCallsRunInWrapper(t *testing.T) {
	b := &sessionBackend{}
	e, _ := newSessionEngine(t, b, nil)
	info := openFake(t, e, "k", "bash")
	res, err := execFake(t, e, "k", info.ID, "echo hi")
	if err != nil || res.Session.Interpreter != "" {
		t.Fatalf("%+v, %v", res, err)
	}
	job := b.liveOne(t).jobs[0]
	code := job.Files[len(job.Files)-1].Path
	if !strings.HasPrefix(code, "/code/call-1-") || !strings.HasSuffix(code, ".sh") {
		t.Fatalf("the code file %q", code)
	}
	if want := kernel.BashCommand("/bin/bash", code, bashStateDir, job.Env); !slices.Equal(job.Argv, want) || job.Resident != nil {
		t.Fatalf("argv %q, want %q", job.Argv, want)
	}
}

// Another caller's session is not found, exactly as an unknown id is,
// whatever it asks; the owner's list holds only the owner's.
func TestSessionOfAnotherCallerIsNotFound(t *testing.T) {
	b := &sessionBackend{fork: true}
	e, _ := newSessionEngine(t, b, nil)
	info := openFake(t, e, "a", "bash")
	ref := execapi.SessionRef{ID: info.ID}
	unknown := execapi.SessionRef{ID: execapi.NewSessionID()}
	for _, r := range []execapi.SessionRef{ref, unknown} {
		ctx := as("b")
		var errs []error
		_, err := execFake(t, e, "b", r.ID, "echo")
		errs = append(errs, err)
		_, err = e.ReadSessionFile(ctx, r, "/tmp/x")
		errs = append(errs, err)
		errs = append(errs, e.WriteSessionFile(ctx, r, "/tmp/x", nil))
		_, err = e.ForkSession(ctx, r)
		errs = append(errs, err)
		_, err = e.CloseSession(ctx, r)
		errs = append(errs, err)
		for i, err := range errs {
			if err != execapi.ErrSessionNotFound {
				t.Fatalf("op %d on %s as another caller: %v", i, r.ID, err)
			}
		}
	}
	if list, err := e.ListSessions(as("b")); err != nil || len(list) != 0 {
		t.Fatalf("b's list: %v, %v", list, err)
	}
	if list, err := e.ListSessions(as("a")); err != nil || len(list) != 1 || list[0].ID != info.ID {
		t.Fatalf("a's list: %v, %v", list, err)
	}
	if all, err := e.AllSessions(as("op")); err != nil || len(all) != 1 || all[0].Owner != "a" {
		t.Fatalf("all: %v, %v", all, err)
	}
	end, err := e.EndSession(as("op"), ref)
	if err != nil || end.Reason != execapi.EndOperator {
		t.Fatalf("operator end: %+v, %v", end, err)
	}
	_, err = execFake(t, e, "a", info.ID, "echo")
	wantEnded(t, err, execapi.EndOperator)
}

// The per-key and overall maxima refuse one more, and an end frees a place.
func TestSessionMaxima(t *testing.T) {
	b := &sessionBackend{}
	e, _ := newSessionEngine(t, b, func(c *Config) { c.Sessions.Policy.PerKey, c.Sessions.Policy.Max = 2, 3 })
	c, err := e.SessionPolicy().ValidateSession(e.Policy(), execapi.SessionRequest{Runtime: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	first := openFake(t, e, "a", "bash")
	openFake(t, e, "a", "bash")
	var refusal *execapi.Refusal
	if _, err := e.OpenSession(as("a"), c); !errors.As(err, &refusal) || refusal.Reason != execapi.RefusedKeySessions || refusal.Limit != 2 {
		t.Fatalf("a third of one key: %v", err)
	}
	openFake(t, e, "b", "bash")
	if _, err := e.OpenSession(as("c"), c); !errors.As(err, &refusal) || refusal.Reason != execapi.RefusedSessionsFull {
		t.Fatalf("a fourth in all: %v", err)
	}
	if _, err := e.CloseSession(as("a"), execapi.SessionRef{ID: first.ID}); err != nil {
		t.Fatal(err)
	}
	openFake(t, e, "c", "bash")
	if created, live, _ := b.counts(); created != 4 || live != 3 {
		t.Fatalf("created %d, live %d", created, live)
	}
}

// The sweeper ends an idle session at its idle TTL, and a busy one at its
// lifetime (its running call learns why); each leaves a tombstone.
func TestSessionSweepEndsIdleAndOld(t *testing.T) {
	running := make(chan struct{})
	b := &sessionBackend{run: func(ctx context.Context, _ *fakeSession, job sandbox.Job) (sandbox.Outcome, error) {
		if strings.Contains(string(job.Files[len(job.Files)-1].Data), "block") {
			close(running)
			<-ctx.Done()
			return sandbox.Outcome{}, ctx.Err()
		}
		return sandbox.Outcome{}, nil
	}}
	e, clk := newSessionEngine(t, b, nil)
	idle := openFake(t, e, "k", "bash")
	clk.add(5 * time.Minute)
	busy := openFake(t, e, "k", "bash")
	clk.add(5 * time.Minute)
	if _, err := execFake(t, e, "k", busy.ID, "echo"); err != nil {
		t.Fatal(err)
	}
	e.sessions.sweep()
	_, err := execFake(t, e, "k", idle.ID, "echo")
	wantEnded(t, err, execapi.EndIdleTTL)

	done := make(chan error, 1)
	go func() {
		_, err := execFake(t, e, "k", busy.ID, "block")
		done <- err
	}()
	<-running
	clk.add(time.Hour)
	e.sessions.sweep()
	wantEnded(t, <-done, execapi.EndMaxLifetime)
	if _, live, _ := b.counts(); live != 0 {
		t.Fatalf("%d sandboxes left", live)
	}
}

// Tombstones are bounded: the oldest is forgotten, and its id is then
// unknown to its owner too.
func TestSessionTombstonesAreBounded(t *testing.T) {
	b := &sessionBackend{}
	e, _ := newSessionEngine(t, b, func(c *Config) { c.Sessions.Tombstones = 2 })
	var ids []string
	for range 3 {
		info := openFake(t, e, "k", "bash")
		if _, err := e.CloseSession(as("k"), execapi.SessionRef{ID: info.ID}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	if _, err := execFake(t, e, "k", ids[0], "echo"); err != execapi.ErrSessionNotFound {
		t.Fatalf("the oldest ended session: %v", err)
	}
	for _, id := range ids[1:] {
		_, err := execFake(t, e, "k", id, "echo")
		wantEnded(t, err, execapi.EndDeleted)
	}
}

// Calls of one session run one at a time: the second waits for the first,
// and one whose own timeout passes meanwhile fails without running.
func TestSessionRunsOneCallAtATime(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	b := &sessionBackend{run: func(ctx context.Context, _ *fakeSession, job sandbox.Job) (sandbox.Outcome, error) {
		entered <- struct{}{}
		if strings.Contains(string(job.Files[len(job.Files)-1].Data), "hold") {
			select {
			case <-release:
			case <-ctx.Done():
				return sandbox.Outcome{}, ctx.Err()
			}
		}
		return sandbox.Outcome{}, nil
	}}
	e, _ := newSessionEngine(t, b, func(c *Config) { c.Policy.MinTimeout = time.Millisecond })
	info := openFake(t, e, "k", "bash")
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := execFakeTimeout(e, "k", info.ID, "hold", 0); err != nil {
			t.Error(err)
		}
	})
	<-entered
	if _, err := execFakeTimeout(e, "k", info.ID, "short", 50); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call whose timeout passed while another ran: %v", err)
	}
	second := make(chan error, 1)
	go func() {
		_, err := execFakeTimeout(e, "k", info.ID, "after", 0)
		second <- err
	}()
	close(release)
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if _, _, overlap := b.counts(); overlap {
		t.Fatal("the session's methods ran concurrently")
	}
	if n := len(b.liveOne(t).jobs); n != 2 {
		t.Fatalf("%d jobs ran, want 2", n)
	}
}

// A memory kill ends the session: the call says 137 and why, the sandbox
// is purged, the next call learns the reason. A timeout that could not be
// separated ends it too.
func TestSessionEndedByItsJob(t *testing.T) {
	for _, tc := range []struct {
		o      sandbox.Outcome
		exit   int
		reason execapi.SessionEndReason
	}{
		{sandbox.Outcome{Ended: true, OOMKilled: true, ExitCode: 1}, execapi.ExitKilled, execapi.EndMemoryLimit},
		{sandbox.Outcome{Ended: true, TimedOut: true, ExitCode: 137}, execapi.ExitTimeout, execapi.EndTimeoutUnseparable},
	} {
		t.Run(string(tc.reason), func(t *testing.T) {
			b := &sessionBackend{run: func(context.Context, *fakeSession, sandbox.Job) (sandbox.Outcome, error) { return tc.o, nil }}
			e, _ := newSessionEngine(t, b, nil)
			info := openFake(t, e, "k", "python3.13")
			res, err := execFake(t, e, "k", info.ID, "x")
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tc.exit || res.Session.Ended == nil || res.Session.Ended.Reason != tc.reason || !res.StatePurged ||
				!strings.Contains(res.Note, "The session has ended") {
				t.Fatalf("%+v", res)
			}
			_, err = execFake(t, e, "k", info.ID, "x")
			wantEnded(t, err, tc.reason)
			if _, live, _ := b.counts(); live != 0 {
				t.Fatalf("%d sandboxes left", live)
			}
		})
	}
}

// A kernel lost by one call is restarted by the next, which says so.
func TestSessionSaysInterpreterRestarted(t *testing.T) {
	n := 0
	b := &sessionBackend{run: func(context.Context, *fakeSession, sandbox.Job) (sandbox.Outcome, error) {
		n++
		return sandbox.Outcome{ResidentLost: n == 1, TimedOut: n == 1, Separated: true}, nil
	}}
	e, _ := newSessionEngine(t, b, nil)
	info := openFake(t, e, "k", "python3.13")
	execFake(t, e, "k", info.ID, "x")
	res, err := execFake(t, e, "k", info.ID, "y")
	if err != nil || res.Session.Interpreter != execapi.InterpreterRestarted || !strings.Contains(res.Note, "fresh one") {
		t.Fatalf("%+v, %v", res, err)
	}
}

// A call the sandbox could not start (its code file not written: the
// session's space is full) is the caller's CallNotStartedError naming the
// sandbox's reason, not an internal error, and the session goes on.
func TestSessionCallNotStartedKeepsTheSession(t *testing.T) {
	n := 0
	b := &sessionBackend{run: func(context.Context, *fakeSession, sandbox.Job) (sandbox.Outcome, error) {
		n++
		if n == 1 {
			return sandbox.Outcome{}, fmt.Errorf("%w: /code/call-1-x.sh: No space left on device", sandbox.ErrNotStarted)
		}
		return sandbox.Outcome{}, nil
	}}
	e, _ := newSessionEngine(t, b, nil)
	info := openFake(t, e, "k", "bash")
	_, err := execFake(t, e, "k", info.ID, "echo")
	var notStarted *execapi.CallNotStartedError
	if !errors.As(err, &notStarted) || notStarted.Reason != "/code/call-1-x.sh: No space left on device" ||
		execapi.SessionErrorCode(err) != execapi.CodeSessionCallNotStarted {
		t.Fatalf("a call that did not start: %v", err)
	}
	if res, err := execFake(t, e, "k", info.ID, "echo"); err != nil || res.Session.Ended != nil {
		t.Fatalf("the next call: %+v, %v", res, err)
	}
}

// A call that cannot start for memory makes the engine end idle
// sessions, the largest first: the sessions' memory is in admission's
// gauge, and what they free lets the call in.
func TestSessionIdleEndedUnderMemoryPressure(t *testing.T) {
	b := &sessionBackend{memory: 300 << 20}
	e, _ := newSessionEngine(t, b, func(c *Config) {
		c.Admission = admission.Settings{MemoryBudget: 1 << 30, CallFloor: 256 << 20, QueueWait: 5 * time.Second}
	})
	var ids []string
	for range 3 {
		ids = append(ids, openFake(t, e, "k", "bash").ID)
	}
	// Admission decides on its sampler's last reading of memory, at most a
	// sampling period old (until then each new session counts by its
	// floor): Admission reads the gauge now, so that the call's decision
	// has the sessions' memory in it.
	e.Admission()
	res, err := e.Exec(as("k"), execapi.Request{Runtime: "bash", Code: "echo"}, nil)
	if err != nil {
		t.Fatalf("a call beside idle sessions that fill the budget: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	ended := 0
	for _, id := range ids {
		if _, err := execFake(t, e, "k", id, "echo"); err != nil {
			wantEnded(t, err, execapi.EndMemoryPressure)
			ended++
		}
	}
	if ended == 0 || ended == 3 {
		t.Fatalf("%d of 3 idle sessions ended for the call, want what it needed", ended)
	}
}

// Forking copies the session's files into a new one of the caller's; a
// level that cannot fork says so.
func TestSessionFork(t *testing.T) {
	b := &sessionBackend{fork: true}
	e, _ := newSessionEngine(t, b, nil)
	info := openFake(t, e, "k", "bash")
	if info.Fork != execapi.ForkFiles {
		t.Fatalf("fork kind %q", info.Fork)
	}
	ref := execapi.SessionRef{ID: info.ID}
	if err := e.WriteSessionFile(as("k"), ref, "/tmp/a", []byte("parent")); err != nil {
		t.Fatal(err)
	}
	child, err := e.ForkSession(as("k"), ref)
	if err != nil || child.ForkedFrom != info.ID || child.ID == info.ID {
		t.Fatalf("fork: %+v, %v", child, err)
	}
	got, err := e.ReadSessionFile(as("k"), execapi.SessionRef{ID: child.ID}, "/tmp/a")
	if err != nil || string(got) != "parent" {
		t.Fatalf("the fork's copy: %q, %v", got, err)
	}

	plain, _ := newSessionEngine(t, &sessionBackend{}, nil)
	p := openFake(t, plain, "k", "bash")
	if _, err := plain.ForkSession(as("k"), execapi.SessionRef{ID: p.ID}); !errors.Is(err, execapi.ErrForkUnsupported) || p.Fork != execapi.ForkNone {
		t.Fatalf("fork on a level without it: %v (%s)", err, p.Fork)
	}
}

// A file bigger than the engine returns is refused as too large.
func TestSessionReadTooLarge(t *testing.T) {
	b := &sessionBackend{}
	e, _ := newSessionEngine(t, b, func(c *Config) { c.MaxReturnBytes = 4 })
	ref := execapi.SessionRef{ID: openFake(t, e, "k", "bash").ID}
	if err := e.WriteSessionFile(as("k"), ref, "/tmp/a", []byte("12345")); err != nil {
		t.Fatal(err)
	}
	var big *execapi.FileTooLargeError
	if _, err := e.ReadSessionFile(as("k"), ref, "/tmp/a"); !errors.As(err, &big) || big.Limit != 4 {
		t.Fatalf("a 5-byte read over a 4-byte limit: %v", err)
	}
	e.WriteSessionFile(as("k"), ref, "/tmp/b", []byte("1234"))
	if got, err := e.ReadSessionFile(as("k"), ref, "/tmp/b"); err != nil || string(got) != "1234" {
		t.Fatalf("a file of the limit: %q, %v", got, err)
	}
}

// A return limit above what one read may ask init for still reads a file
// (the read is capped, not refused), and a failure that is no refusal of
// the path is not reported as a missing file.
func TestSessionReadBeyondOneReadsBound(t *testing.T) {
	b := &sessionBackend{}
	e, _ := newSessionEngine(t, b, func(c *Config) { c.MaxReturnBytes = 300 << 20 })
	ref := execapi.SessionRef{ID: openFake(t, e, "k", "bash").ID}
	if err := e.WriteSessionFile(as("k"), ref, "/tmp/a", []byte("data")); err != nil {
		t.Fatal(err)
	}
	if got, err := e.ReadSessionFile(as("k"), ref, "/tmp/a"); err != nil || string(got) != "data" {
		t.Fatalf("a read under a 300 MiB limit: %q, %v", got, err)
	}
	if _, err := e.ReadSessionFile(as("k"), ref, "/tmp/none"); !errors.Is(err, execapi.ErrSessionFileNotFound) {
		t.Fatalf("a missing file: %v, want ErrSessionFileNotFound", err)
	}
}

// Shutting down ends every session, running ones too, and leaves nothing.
func TestSessionShutdownEndsAll(t *testing.T) {
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
	openFake(t, e, "a", "bash")
	busy := openFake(t, e, "b", "python3.13")
	done := make(chan error, 1)
	go func() {
		_, err := execFake(t, e, "b", busy.ID, "block")
		done <- err
	}()
	<-running
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	wantEnded(t, <-done, execapi.EndServerShutdown)
	if _, live, _ := b.counts(); live != 0 {
		t.Fatalf("%d sandboxes left", live)
	}
	c, _ := e.SessionPolicy().ValidateSession(e.Policy(), execapi.SessionRequest{Runtime: "bash"})
	var refusal *execapi.Refusal
	if _, err := e.OpenSession(as("a"), c); !errors.As(err, &refusal) || refusal.Reason != execapi.RefusedDraining {
		t.Fatalf("open after shutdown: %v", err)
	}
}
