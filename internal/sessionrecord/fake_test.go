package sessionrecord

import (
	"context"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// fakeSessions is a small in-memory execapi.SessionService and
// SessionAdmin that keeps the contract's ownership rules (another
// caller's id is not found, the owner's ended one is a
// *SessionEndedError) and records the refs it was given.
type fakeSessions struct {
	mu       sync.Mutex
	worker   string // the worker its sessions are opened on
	sessions map[string]*fakeSession
	refs     []execapi.SessionRef
	// endedBy receives each id EndSession ends.
	endedBy chan string
	// lost makes every use of a session a *SessionLostError, as a
	// cluster's front end answers once the session's worker is gone.
	lost bool
	// unlisted sessions are left out of AllSessions, as a cluster's
	// listing leaves out a worker that did not answer in time.
	unlisted map[string]bool
	// noAdmin hides SessionAdmin (fakeNoAdmin).
}

type fakeSession struct {
	owner string
	info  execapi.SessionInfo
	end   *execapi.SessionEnd
}

func newFake(worker string) *fakeSessions {
	return &fakeSessions{worker: worker, sessions: map[string]*fakeSession{}, endedBy: make(chan string, 16)}
}

func (f *fakeSessions) SessionPolicy() execapi.SessionPolicy { return execapi.DefaultSessionPolicy() }

func (f *fakeSessions) open(ctx context.Context, runtime string) execapi.SessionInfo {
	now := time.Now()
	info := execapi.SessionInfo{ID: execapi.NewSessionID(), Runtime: runtime, CreatedAt: now, LastUsedAt: now,
		ExpiresAt: now.Add(10 * time.Minute), Worker: f.worker, Owner: execapi.CallerFrom(ctx)}
	f.sessions[info.ID] = &fakeSession{owner: info.Owner, info: info}
	return info
}

func (f *fakeSessions) OpenSession(ctx context.Context, c execapi.CheckedSession) (execapi.SessionInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.open(ctx, c.Runtime), nil
}

// get finds the caller's open session, as the engine does.
func (f *fakeSessions) get(ctx context.Context, ref execapi.SessionRef) (*fakeSession, error) {
	f.refs = append(f.refs, ref)
	if f.lost {
		return nil, &execapi.SessionLostError{Worker: ref.Worker, Why: "the fake lost it"}
	}
	s, ok := f.sessions[ref.ID]
	if !ok || s.owner != execapi.CallerFrom(ctx) {
		return nil, execapi.ErrSessionNotFound
	}
	if s.end != nil {
		return nil, &execapi.SessionEndedError{End: *s.end}
	}
	return s, nil
}

func (f *fakeSessions) ExecInSession(ctx context.Context, ref execapi.SessionRef, c execapi.Checked, events execapi.EventSink) (execapi.SessionResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.get(ctx, ref)
	if err != nil {
		return execapi.SessionResult{}, err
	}
	s.info.ExpiresAt = s.info.ExpiresAt.Add(time.Minute)
	res := execapi.SessionResult{Session: execapi.SessionCallInfo{ID: ref.ID, ExpiresAt: s.info.ExpiresAt}}
	if c.Code == "exit-memory" {
		s.end = &execapi.SessionEnd{Reason: execapi.EndMemoryLimit, At: time.Now()}
		res.Session.Ended = s.end
	}
	return res, nil
}

func (f *fakeSessions) Session(ctx context.Context, ref execapi.SessionRef) (execapi.SessionInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.get(ctx, ref)
	if err != nil {
		return execapi.SessionInfo{}, err
	}
	return s.info, nil
}

func (f *fakeSessions) ListSessions(ctx context.Context) ([]execapi.SessionInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []execapi.SessionInfo
	for _, s := range f.sessions {
		if s.end == nil && s.owner == execapi.CallerFrom(ctx) {
			out = append(out, s.info)
		}
	}
	return out, nil
}

func (f *fakeSessions) finish(s *fakeSession, reason execapi.SessionEndReason) execapi.SessionEnd {
	s.end = &execapi.SessionEnd{Reason: reason, At: time.Now(), StatePurged: true}
	return *s.end
}

func (f *fakeSessions) CloseSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionEnd, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.get(ctx, ref)
	if err != nil {
		return execapi.SessionEnd{}, err
	}
	return f.finish(s, execapi.EndDeleted), nil
}

func (f *fakeSessions) ReadSessionFile(ctx context.Context, ref execapi.SessionRef, path string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.get(ctx, ref); err != nil {
		return nil, err
	}
	return []byte(path), nil
}

func (f *fakeSessions) WriteSessionFile(ctx context.Context, ref execapi.SessionRef, path string, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := f.get(ctx, ref)
	return err
}

func (f *fakeSessions) ForkSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.get(ctx, ref)
	if err != nil {
		return execapi.SessionInfo{}, err
	}
	info := f.open(ctx, s.info.Runtime)
	info.ForkedFrom = ref.ID
	return info, nil
}

func (f *fakeSessions) AllSessions(ctx context.Context) ([]execapi.SessionInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []execapi.SessionInfo
	for id, s := range f.sessions {
		if s.end == nil && !f.unlisted[id] {
			out = append(out, s.info)
		}
	}
	return out, nil
}

func (f *fakeSessions) EndSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionEnd, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refs = append(f.refs, ref)
	s, ok := f.sessions[ref.ID]
	if !ok || s.end != nil {
		return execapi.SessionEnd{}, execapi.ErrSessionNotFound
	}
	end := f.finish(s, execapi.EndOperator)
	f.endedBy <- ref.ID
	return end, nil
}

// expire ends a session by itself, as the engine's idle TTL does.
func (f *fakeSessions) expire(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finish(f.sessions[id], execapi.EndIdleTTL)
}

// forgetAll drops every session, tombstones too, as a restarted engine has.
func (f *fakeSessions) forgetAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sessions = map[string]*fakeSession{}
}

// lastRef is the ref of the last call that named a session.
func (f *fakeSessions) lastRef() execapi.SessionRef {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.refs) == 0 {
		return execapi.SessionRef{}
	}
	return f.refs[len(f.refs)-1]
}

// sessionsOnly is a SessionService without SessionAdmin.
type sessionsOnly struct{ execapi.SessionService }
