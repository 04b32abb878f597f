package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// sessionBackend is a fake backend whose sandboxes are sessions (for the
// registry's logic: the real ones are tested with real sandboxes). Its
// sessions keep their files in memory and run jobs with run; each uses
// memory bytes. It is also a MemoryBudget over its live sandboxes.
type sessionBackend struct {
	// run plays one job (nil: it prints the code file and exits 0).
	run func(ctx context.Context, s *fakeSession, job sandbox.Job) (sandbox.Outcome, error)
	// memory is what each sandbox uses.
	memory int64
	// fork makes sandboxes Forkers of kind "files".
	fork bool

	mu        sync.Mutex
	live      map[*fakeSession]bool
	created   int
	destroyed int
	configs   []sandbox.Config
	overlap   bool // a session's methods were called concurrently
	budget    int64
}

func (b *sessionBackend) Name() string                          { return "fake-sessions" }
func (b *sessionBackend) Limitations() []string                 { return nil }
func (b *sessionBackend) UnenforcedLimits() []sandbox.Limit     { return nil }
func (b *sessionBackend) Close() error                          { return nil }
func (b *sessionBackend) SetMemoryBudget(n int64) (bool, error) { b.budget = n; return true, nil }

func (b *sessionBackend) MemoryInUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int64(len(b.live)) * b.memory
}

func (b *sessionBackend) Create(_ context.Context, cfg sandbox.Config) (sandbox.Sandbox, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.live == nil {
		b.live = map[*fakeSession]bool{}
	}
	s := &fakeSession{b: b, id: fmt.Sprintf("fake-%d", b.created), session: cfg.Session, files: map[string][]byte{}}
	b.created++
	b.configs = append(b.configs, cfg)
	b.live[s] = true
	if b.fork {
		return &forkingSession{s}, nil
	}
	return s, nil
}

func (b *sessionBackend) counts() (created, live int, overlap bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.created, len(b.live), b.overlap
}

// fakeSession is one sandbox of sessionBackend.
type fakeSession struct {
	b       *sessionBackend
	id      string
	session bool

	mu      sync.Mutex
	inUse   bool
	files   map[string][]byte
	jobs    []sandbox.Job
	dead    bool
	kernels map[string]bool
}

func (s *fakeSession) ID() string         { return s.id }
func (s *fakeSession) MemoryUsage() int64 { return s.b.memory }

func (s *fakeSession) Run(context.Context, sandbox.Job) (sandbox.Outcome, error) {
	return sandbox.Outcome{Files: map[string][]byte{}}, nil
}

func (s *fakeSession) Destroy() sandbox.Teardown {
	s.b.mu.Lock()
	if s.b.live[s] {
		delete(s.b.live, s)
		s.b.destroyed++
	}
	s.b.mu.Unlock()
	return sandbox.Teardown{Purged: true}
}

// enter and leave catch concurrent use of the session's methods.
func (s *fakeSession) enter() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inUse {
		s.b.mu.Lock()
		s.b.overlap = true
		s.b.mu.Unlock()
	}
	s.inUse = true
}

func (s *fakeSession) leave() { s.mu.Lock(); s.inUse = false; s.mu.Unlock() }

func (s *fakeSession) RunNext(ctx context.Context, job sandbox.Job) (sandbox.Outcome, error) {
	s.enter()
	defer s.leave()
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return sandbox.Outcome{}, sandbox.ErrSessionEnded
	}
	for _, f := range job.Files {
		s.files[f.Path] = f.Data
	}
	s.jobs = append(s.jobs, job)
	var started bool
	if job.Resident != nil {
		if s.kernels == nil {
			s.kernels = map[string]bool{}
		}
		started = !s.kernels[job.Resident.Key]
		s.kernels[job.Resident.Key] = true
	}
	s.mu.Unlock()
	var o sandbox.Outcome
	var err error
	if s.b.run != nil {
		o, err = s.b.run(ctx, s, job)
	} else {
		io.WriteString(job.Stdout, string(job.Files[len(job.Files)-1].Data))
	}
	o.ResidentStarted = o.ResidentStarted || started
	if o.ResidentLost {
		s.mu.Lock()
		delete(s.kernels, job.Resident.Key)
		s.mu.Unlock()
	}
	if o.Ended {
		s.mu.Lock()
		s.dead = true
		s.mu.Unlock()
	}
	if o.Files == nil {
		o.Files = map[string][]byte{}
	}
	return o, err
}

func (s *fakeSession) ReadFile(_ context.Context, path string, max int64) ([]byte, error) {
	s.enter()
	defer s.leave()
	s.mu.Lock()
	defer s.mu.Unlock()
	if max > initproto.MaxFileReadBytes {
		// As hostside's Conn refuses it: not a refusal of the path.
		return nil, fmt.Errorf("a read of up to %d bytes is over the limit of %d", max, initproto.MaxFileReadBytes)
	}
	data, ok := s.files[path]
	if !ok {
		return nil, fmt.Errorf("%s: no such file: %w", path, sandbox.ErrFileRefused)
	}
	if int64(len(data)) > max {
		data = data[:max]
	}
	return data, nil
}

func (s *fakeSession) WriteFile(_ context.Context, path string, data []byte) error {
	s.enter()
	defer s.leave()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[path] = data
	return nil
}

func (s *fakeSession) Alive() bool { s.mu.Lock(); defer s.mu.Unlock(); return !s.dead }

// forkingSession is a fakeSession that forks (files).
type forkingSession struct{ *fakeSession }

func (f *forkingSession) Unwrap() sandbox.Sandbox { return f.fakeSession }
func (f *forkingSession) ForkKind() string        { return execapi.ForkFiles }
func (f *forkingSession) Fork(ctx context.Context, cfg sandbox.Config) (sandbox.Sandbox, error) {
	sb, err := f.b.Create(ctx, cfg)
	if err != nil {
		return nil, err
	}
	child := sb.(*forkingSession)
	f.mu.Lock()
	for p, d := range f.files {
		child.files[p] = d
	}
	f.mu.Unlock()
	return child, nil
}

// fakeClock is a settable clock for the sweeper.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// newSessionEngine is an engine with sessions on over b, its sweeper
// left to the test (sweep), its clock clk.
func newSessionEngine(t *testing.T, b *sessionBackend, mutate func(*Config)) (*Engine, *fakeClock) {
	t.Helper()
	e := newFakeEngine(t, b, func(c *Config) {
		c.Sessions.Policy = execapi.DefaultSessionPolicy()
		c.Sessions.Policy.Enabled = true
		c.Sessions.Sweep = time.Hour
		if mutate != nil {
			mutate(c)
		}
	})
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	e.sessions.mu.Lock()
	e.sessions.now = clk.now
	e.sessions.mu.Unlock()
	return e, clk
}

// as is ctx of caller.
func as(caller string) context.Context {
	return execapi.WithCaller(context.Background(), caller)
}

// openFake opens a session of runtime for caller.
func openFake(t *testing.T, e *Engine, caller, runtime string) execapi.SessionInfo {
	t.Helper()
	c, err := e.SessionPolicy().ValidateSession(e.Policy(), execapi.SessionRequest{Runtime: runtime})
	if err != nil {
		t.Fatal(err)
	}
	info, err := e.OpenSession(as(caller), c)
	if err != nil {
		t.Fatalf("open a %s session: %v", runtime, err)
	}
	return info
}

// execFake runs code in session id as caller.
func execFake(t *testing.T, e *Engine, caller, id, code string) (execapi.SessionResult, error) {
	t.Helper()
	return execFakeTimeout(e, caller, id, code, 0)
}

func execFakeTimeout(e *Engine, caller, id, code string, timeoutMS int) (execapi.SessionResult, error) {
	r := execapi.Request{Code: code, Limits: execapi.Limits{TimeoutMS: timeoutMS}}
	// An unknown or ended id: any runtime, to reach the engine's answer.
	info := execapi.SessionInfo{Runtime: "bash", Network: execapi.NetworkNone}
	if s, err := e.sessions.lookup(as(caller), id, true); err == nil {
		info = e.sessions.snapshot(s)
	}
	c, err := e.Policy().ValidateInSession(r, info, nil)
	if err != nil {
		return execapi.SessionResult{}, err
	}
	return e.ExecInSession(as(caller), execapi.SessionRef{ID: id}, c, nil)
}

// wantEnded checks that err is a *SessionEndedError for reason.
func wantEnded(t *testing.T, err error, reason execapi.SessionEndReason) {
	t.Helper()
	var ended *execapi.SessionEndedError
	if !errors.As(err, &ended) || ended.End.Reason != reason {
		t.Fatalf("got %v, want the session ended for %s", err, reason)
	}
}
