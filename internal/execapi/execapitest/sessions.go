package execapitest

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Sessions is a Service that holds sessions too (execapi.SessionService
// and execapi.SessionAdmin), in memory, by the contract's rules: ids from
// execapi.NewSessionID bound to the caller that opened them, the same
// ErrSessionNotFound for an unknown id and another caller's, a
// *SessionEndedError (the owner's only) for one ended, the policy's per-key
// and overall maxima as the engine's refusals. A call in a session runs
// through the Service's script (Respond) and is recorded in Calls as any
// call; the session's files are a map. Safe for concurrent use.
type Sessions struct {
	*Service
	policy execapi.SessionPolicy

	mu      sync.Mutex
	open    map[string]*session
	gone    map[string]goneSession
	forkErr error
	// callErr is the next ExecInSession's answer (FailNextCall).
	callErr  error
	sessCall []SessionCall
	// lists counts ListSessions calls, lookups Session calls.
	lists, lookups int
}

var (
	_ execapi.SessionService = (*Sessions)(nil)
	_ execapi.SessionAdmin   = (*Sessions)(nil)
)

// session is one open session of the fake.
type session struct {
	info  execapi.SessionInfo
	files map[string][]byte
	// ran is whether a call ran in it yet (its interpreter started).
	ran bool
}

// goneSession is a session no longer open: ended (with its end) or lost
// with its worker.
type goneSession struct {
	owner string
	end   *execapi.SessionEnd
	lost  bool
}

// SessionCall is one call in a session as the fake saw it.
type SessionCall struct {
	ID      string
	Caller  string
	Checked execapi.Checked
}

// NewSessions returns a Sessions over svc holding sessions to sp (which
// should be Enabled).
func NewSessions(svc *Service, sp execapi.SessionPolicy) *Sessions {
	return &Sessions{Service: svc, policy: sp, open: map[string]*session{}, gone: map[string]goneSession{}}
}

// SessionPolicy implements execapi.SessionService.
func (s *Sessions) SessionPolicy() execapi.SessionPolicy { return s.policy }

// FailForks makes ForkSession answer err (execapi.ErrForkUnsupported, say);
// nil forks again.
func (s *Sessions) FailForks(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forkErr = err
}

// FailNextCall makes the next call in any session answer err, as the
// engine does for a call its sandbox could not start.
func (s *Sessions) FailNextCall(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.callErr = err
}

// End ends an open session with reason, as the engine's sweeper or a
// memory kill does: its owner's next use gets a *SessionEndedError.
func (s *Sessions) End(id string, reason execapi.SessionEndReason) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endLocked(id, reason)
}

// Lose makes an open session lost with its worker, as a cluster's front
// end sees it: its owner's next use gets a *SessionLostError.
func (s *Sessions) Lose(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ses, ok := s.open[id]; ok {
		delete(s.open, id)
		s.gone[id] = goneSession{owner: ses.info.Owner, lost: true}
	}
}

// File returns a session's file as the fake holds it (open sessions only).
func (s *Sessions) File(id, path string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ses, ok := s.open[id]
	if !ok {
		return nil, false
	}
	data, ok := ses.files[path]
	return data, ok
}

// SessionCalls returns every call that ran in a session, in order.
func (s *Sessions) SessionCalls() []SessionCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sessCall)
}

func (s *Sessions) endLocked(id string, reason execapi.SessionEndReason) execapi.SessionEnd {
	ses := s.open[id]
	delete(s.open, id)
	end := execapi.SessionEnd{Reason: reason, At: time.Now().UTC(), StatePurged: true}
	s.gone[id] = goneSession{owner: ses.info.Owner, end: &end}
	return end
}

// lookupLocked is the caller's open session ref names, or the contract's
// error for it.
func (s *Sessions) lookupLocked(ctx context.Context, ref execapi.SessionRef) (*session, error) {
	caller := execapi.CallerFrom(ctx)
	if ses, ok := s.open[ref.ID]; ok && ses.info.Owner == caller {
		return ses, nil
	}
	g, ok := s.gone[ref.ID]
	switch {
	case !ok || g.owner != caller:
		return nil, execapi.ErrSessionNotFound
	case g.lost:
		return nil, &execapi.SessionLostError{Worker: "fake", Why: "the test lost it"}
	default:
		return nil, &execapi.SessionEndedError{End: *g.end}
	}
}

// admitLocked refuses a new session of caller past the policy's maxima.
func (s *Sessions) admitLocked(caller string) error {
	mine := 0
	for _, ses := range s.open {
		if ses.info.Owner == caller {
			mine++
		}
	}
	if s.policy.PerKey > 0 && mine >= s.policy.PerKey {
		return &execapi.Refusal{Reason: execapi.RefusedKeySessions, Limit: s.policy.PerKey}
	}
	if s.policy.Max > 0 && len(s.open) >= s.policy.Max {
		return &execapi.Refusal{Reason: execapi.RefusedSessionsFull, Limit: s.policy.Max, RetryAfter: time.Second}
	}
	return nil
}

// interpreterOf is what persists of a runtime's interpreter.
func interpreterOf(runtime string) string {
	switch {
	case strings.HasPrefix(runtime, "python"):
		return execapi.InterpreterPython
	case strings.HasPrefix(runtime, "node"):
		return execapi.InterpreterNode
	case runtime == "bash":
		return execapi.InterpreterBash
	}
	return execapi.InterpreterNone
}

// newLocked opens a session of caller with info's settings.
func (s *Sessions) newLocked(caller string, info execapi.SessionInfo, files map[string][]byte) execapi.SessionInfo {
	now := time.Now().UTC()
	info.ID, info.Owner, info.State = execapi.NewSessionID(), caller, execapi.SessionIdle
	info.CreatedAt, info.LastUsedAt = now, now
	info.LifetimeEndsAt = now.Add(time.Duration(info.MaxLifetimeMS) * time.Millisecond)
	info.ExpiresAt = execapi.Expiry(now, time.Duration(info.IdleTTLMS)*time.Millisecond, info.LifetimeEndsAt)
	info.Interpreter, info.Fork = interpreterOf(info.Runtime), execapi.ForkFiles
	s.open[info.ID] = &session{info: info, files: files}
	return info
}

// OpenSession implements execapi.SessionService.
func (s *Sessions) OpenSession(ctx context.Context, c execapi.CheckedSession) (execapi.SessionInfo, error) {
	caller := execapi.CallerFrom(ctx)
	s.Service.mu.Lock()
	installed, list := s.Service.installedLocked(c.Runtime), s.Service.runtimeListLocked()
	s.Service.mu.Unlock()
	if !installed {
		return execapi.SessionInfo{}, &execapi.Refusal{Reason: execapi.RefusedUnknownRuntime, Field: "runtime",
			Detail: "runtime " + c.Runtime + " is not installed; installed runtimes: " + list}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.admitLocked(caller); err != nil {
		return execapi.SessionInfo{}, err
	}
	info := execapi.SessionInfo{Runtime: c.Runtime, Network: c.Network,
		Limits:    execapi.Limits{MemoryMB: c.MemoryMB, TimeoutMS: int(c.Timeout.Milliseconds())},
		IdleTTLMS: c.IdleTTL.Milliseconds(), MaxLifetimeMS: c.Lifetime.Milliseconds()}
	return s.newLocked(caller, info, map[string][]byte{}), nil
}

// ExecInSession implements execapi.SessionService: the call runs through
// the Service's script as any call does.
func (s *Sessions) ExecInSession(ctx context.Context, ref execapi.SessionRef, c execapi.Checked, events execapi.EventSink) (execapi.SessionResult, error) {
	s.mu.Lock()
	ses, err := s.lookupLocked(ctx, ref)
	if err == nil && s.callErr != nil {
		err, s.callErr = s.callErr, nil
	}
	if err != nil {
		s.mu.Unlock()
		return execapi.SessionResult{}, err
	}
	interp := execapi.InterpreterKept
	if !ses.ran {
		interp = execapi.InterpreterStarted
	}
	ses.ran = true
	if ses.info.Interpreter == execapi.InterpreterNone || ses.info.Interpreter == execapi.InterpreterBash {
		interp = ""
	}
	s.sessCall = append(s.sessCall, SessionCall{ID: ref.ID, Caller: execapi.CallerFrom(ctx), Checked: c})
	s.mu.Unlock()

	res, err := s.Service.run(ctx, Call{Caller: execapi.CallerFrom(ctx), Checked: c}, events)
	if err != nil {
		return execapi.SessionResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sr := execapi.SessionResult{Result: res, Session: execapi.SessionCallInfo{ID: ref.ID, Interpreter: interp}}
	if open, ok := s.open[ref.ID]; ok {
		now := time.Now().UTC()
		open.info.LastUsedAt = now
		open.info.ExpiresAt = execapi.Expiry(now, time.Duration(open.info.IdleTTLMS)*time.Millisecond, open.info.LifetimeEndsAt)
		sr.Session.ExpiresAt = open.info.ExpiresAt
	}
	sr.FinishInSession()
	return sr, nil
}

// Session implements execapi.SessionService.
func (s *Sessions) Session(ctx context.Context, ref execapi.SessionRef) (execapi.SessionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lookups++
	ses, err := s.lookupLocked(ctx, ref)
	if err != nil {
		return execapi.SessionInfo{}, err
	}
	return ses.info, nil
}

// Lookups reports how many times ListSessions and Session were called: a
// front end that looks one session up before each call must not list the
// caller's (in a cluster, a list asks every worker).
func (s *Sessions) Lookups() (lists, sessions int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists, s.lookups
}

// ListSessions implements execapi.SessionService.
func (s *Sessions) ListSessions(ctx context.Context) ([]execapi.SessionInfo, error) {
	caller := execapi.CallerFrom(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	out := []execapi.SessionInfo{}
	for _, ses := range s.open {
		if ses.info.Owner == caller {
			out = append(out, ses.info)
		}
	}
	sortSessions(out)
	return out, nil
}

func sortSessions(list []execapi.SessionInfo) {
	slices.SortFunc(list, func(a, b execapi.SessionInfo) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// CloseSession implements execapi.SessionService.
func (s *Sessions) CloseSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionEnd, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.lookupLocked(ctx, ref); err != nil {
		return execapi.SessionEnd{}, err
	}
	return s.endLocked(ref.ID, execapi.EndDeleted), nil
}

// ReadSessionFile implements execapi.SessionService; a file is too large
// past the Service's MaxReturnBytes (Describe's).
func (s *Sessions) ReadSessionFile(ctx context.Context, ref execapi.SessionRef, path string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ses, err := s.lookupLocked(ctx, ref)
	if err != nil {
		return nil, err
	}
	data, ok := ses.files[path]
	if !ok {
		return nil, execapi.ErrSessionFileNotFound
	}
	if limit := s.Service.info.MaxReturnBytes; int64(len(data)) > limit {
		return nil, &execapi.FileTooLargeError{Path: path, Limit: limit}
	}
	return slices.Clone(data), nil
}

// WriteSessionFile implements execapi.SessionService.
func (s *Sessions) WriteSessionFile(ctx context.Context, ref execapi.SessionRef, path string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ses, err := s.lookupLocked(ctx, ref)
	if err != nil {
		return err
	}
	ses.files[path] = slices.Clone(data)
	return nil
}

// ForkSession implements execapi.SessionService: the child has a copy of
// the parent's files (ForkFiles) and counts toward the caller's maximum.
func (s *Sessions) ForkSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	parent, err := s.lookupLocked(ctx, ref)
	if err != nil {
		return execapi.SessionInfo{}, err
	}
	if s.forkErr != nil {
		return execapi.SessionInfo{}, s.forkErr
	}
	caller := execapi.CallerFrom(ctx)
	if err := s.admitLocked(caller); err != nil {
		return execapi.SessionInfo{}, err
	}
	info := parent.info
	info.ForkedFrom = ref.ID
	return s.newLocked(caller, info, maps.Clone(parent.files)), nil
}

// AllSessions implements execapi.SessionAdmin.
func (s *Sessions) AllSessions(context.Context) ([]execapi.SessionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []execapi.SessionInfo{}
	for _, ses := range s.open {
		out = append(out, ses.info)
	}
	sortSessions(out)
	return out, nil
}

// EndSession implements execapi.SessionAdmin.
func (s *Sessions) EndSession(_ context.Context, ref execapi.SessionRef) (execapi.SessionEnd, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.open[ref.ID]; !ok {
		return execapi.SessionEnd{}, execapi.ErrSessionNotFound
	}
	return s.endLocked(ref.ID, execapi.EndOperator), nil
}

// PutFile sets a file of an open session as a call in it would have
// written it, past the bounds a front end holds a write to (a file bigger
// than a read returns, say).
func (s *Sessions) PutFile(id, path string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ses, ok := s.open[id]; ok {
		ses.files[path] = slices.Clone(data)
	}
}
