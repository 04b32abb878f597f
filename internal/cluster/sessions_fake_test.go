package cluster_test

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// fakeSessions is a logic fake of the engine's SessionService (and
// SessionAdmin): sessions are maps of files bound to their caller, a call
// echoes its code as stdout (and as an event), and hold, when set, keeps
// a call running until it is closed or its context ends.
type fakeSessions struct {
	policy execapi.SessionPolicy
	hold   chan struct{}

	mu       sync.Mutex
	sessions map[string]*fakeSession
	ran      int
	// looked counts Session calls.
	looked int
}

type fakeSession struct {
	info  execapi.SessionInfo
	files map[string][]byte
	ended *execapi.SessionEnd
}

func newFakeSessions() *fakeSessions {
	sp := execapi.DefaultSessionPolicy()
	sp.Enabled = true
	return &fakeSessions{policy: sp, sessions: map[string]*fakeSession{}}
}

func (s *fakeSessions) SessionPolicy() execapi.SessionPolicy { return s.policy }

func (s *fakeSessions) OpenSession(ctx context.Context, c execapi.CheckedSession) (execapi.SessionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	info := execapi.SessionInfo{ID: execapi.NewSessionID(), Runtime: c.Runtime, Network: c.Network, CreatedAt: now, LastUsedAt: now,
		Limits: execapi.Limits{MemoryMB: c.MemoryMB, TimeoutMS: int(c.Timeout.Milliseconds())}, State: execapi.SessionIdle,
		Interpreter: execapi.InterpreterBash, Fork: execapi.ForkFiles, Owner: execapi.CallerFrom(ctx)}
	s.sessions[info.ID] = &fakeSession{info: info, files: map[string][]byte{}}
	return info, nil
}

// get is the caller's session, or the contract's error for it.
func (s *fakeSessions) get(ctx context.Context, id string, admin bool) (*fakeSession, error) {
	fs := s.sessions[id]
	if fs == nil || !admin && fs.info.Owner != execapi.CallerFrom(ctx) {
		return nil, execapi.ErrSessionNotFound
	}
	if fs.ended != nil {
		if admin {
			return nil, execapi.ErrSessionNotFound
		}
		return nil, &execapi.SessionEndedError{End: *fs.ended}
	}
	return fs, nil
}

func (s *fakeSessions) ExecInSession(ctx context.Context, ref execapi.SessionRef, c execapi.Checked, events execapi.EventSink) (execapi.SessionResult, error) {
	s.mu.Lock()
	_, err := s.get(ctx, ref.ID, false)
	if err == nil {
		s.ran++
	}
	hold := s.hold
	s.mu.Unlock()
	if err != nil {
		return execapi.SessionResult{}, err
	}
	if events != nil {
		events(execapi.Event{Kind: execapi.EventStdout, Data: []byte(c.Code)})
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return execapi.SessionResult{}, ctx.Err()
		}
	}
	res := execapi.SessionResult{Result: execapi.Result{Stdout: c.Code, Files: map[string]string{}}, Session: execapi.SessionCallInfo{ID: ref.ID}}
	res.FinishInSession()
	return res, nil
}

func (s *fakeSessions) Session(ctx context.Context, ref execapi.SessionRef) (execapi.SessionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.looked++
	fs, err := s.get(ctx, ref.ID, false)
	if err != nil {
		return execapi.SessionInfo{}, err
	}
	return fs.info, nil
}

// lookups is how many times Session was called.
func (s *fakeSessions) lookups() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.looked
}

func (s *fakeSessions) ListSessions(ctx context.Context) ([]execapi.SessionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []execapi.SessionInfo
	for _, fs := range s.sessions {
		if fs.ended == nil && fs.info.Owner == execapi.CallerFrom(ctx) {
			out = append(out, fs.info)
		}
	}
	return out, nil
}

func (s *fakeSessions) CloseSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionEnd, error) {
	return s.end(ctx, ref, execapi.EndDeleted, false)
}

func (s *fakeSessions) end(ctx context.Context, ref execapi.SessionRef, why execapi.SessionEndReason, admin bool) (execapi.SessionEnd, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs, err := s.get(ctx, ref.ID, admin)
	if err != nil {
		return execapi.SessionEnd{}, err
	}
	fs.ended = &execapi.SessionEnd{Reason: why, At: time.Now(), StatePurged: true}
	fs.files = nil
	return *fs.ended, nil
}

func (s *fakeSessions) ReadSessionFile(ctx context.Context, ref execapi.SessionRef, path string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs, err := s.get(ctx, ref.ID, false)
	if err != nil {
		return nil, err
	}
	data, ok := fs.files[path]
	if !ok {
		return nil, execapi.ErrSessionFileNotFound
	}
	if len(data) > 1<<20 {
		return nil, &execapi.FileTooLargeError{Path: path, Limit: 1 << 20}
	}
	return data, nil
}

func (s *fakeSessions) WriteSessionFile(ctx context.Context, ref execapi.SessionRef, path string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs, err := s.get(ctx, ref.ID, false)
	if err != nil {
		return err
	}
	fs.files[path] = data
	return nil
}

func (s *fakeSessions) ForkSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs, err := s.get(ctx, ref.ID, false)
	if err != nil {
		return execapi.SessionInfo{}, err
	}
	info := fs.info
	info.ID, info.ForkedFrom = execapi.NewSessionID(), fs.info.ID
	s.sessions[info.ID] = &fakeSession{info: info, files: maps.Clone(fs.files)}
	return info, nil
}

func (s *fakeSessions) AllSessions(ctx context.Context) ([]execapi.SessionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []execapi.SessionInfo
	for _, fs := range s.sessions {
		if fs.ended == nil {
			out = append(out, fs.info)
		}
	}
	return out, nil
}

func (s *fakeSessions) EndSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionEnd, error) {
	return s.end(ctx, ref, execapi.EndOperator, true)
}

// open counts the sessions not ended.
func (s *fakeSessions) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, fs := range s.sessions {
		if fs.ended == nil {
			n++
		}
	}
	return n
}

// calls counts the calls run.
func (s *fakeSessions) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ran
}
