package mcpserver

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
)

// fakeSessions is a scripted execapi.SessionService over fakeService, for
// what the session tools alone decide. A session keeps variables: "set
// K=V" stores one, "get K" prints it; "echo W" prints W; "png PATH"
// returns a PNG at PATH; "oom" is killed at the memory limit, which ends
// the session; "wait" prints "running" and blocks until the call
// is cancelled. Times come from a fixed clock, so results can be compared.
type fakeSessions struct {
	*execapitest.Service
	policy execapi.SessionPolicy
	now    time.Time

	mu       sync.Mutex
	sessions map[string]*fakeSession
	ended    map[string]execapi.SessionEnd
	lost     map[string]bool
	// checked are the calls that reached ExecInSession; cancelled gets
	// the error of each "wait" call once its ctx ends.
	checked   []execapi.Checked
	cancelled chan error
	// lists and reads count ListSessions and ReadSessionFile calls: the
	// tools look a session up (Session), never list or probe.
	lists, reads int
}

var _ execapi.SessionService = (*fakeSessions)(nil)

type fakeSession struct {
	info  execapi.SessionInfo
	vars  map[string]string
	calls int
}

func newFakeSessions(enabled bool) *fakeSessions {
	sp := execapi.DefaultSessionPolicy()
	sp.Enabled = enabled
	return &fakeSessions{Service: fakeService(), policy: sp, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		sessions: map[string]*fakeSession{}, ended: map[string]execapi.SessionEnd{}, lost: map[string]bool{},
		cancelled: make(chan error, 4)}
}

func (f *fakeSessions) SessionPolicy() execapi.SessionPolicy { return f.policy }

func (f *fakeSessions) OpenSession(ctx context.Context, c execapi.CheckedSession) (execapi.SessionInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, s := range f.sessions {
		if s.info.Owner == execapi.CallerFrom(ctx) {
			n++
		}
	}
	if n >= f.policy.PerKey {
		return execapi.SessionInfo{}, &execapi.Refusal{Reason: execapi.RefusedKeySessions, Limit: f.policy.PerKey}
	}
	interp := execapi.InterpreterNone
	switch {
	case strings.HasPrefix(c.Runtime, "python"):
		interp = execapi.InterpreterPython
	case c.Runtime == "bash":
		interp = execapi.InterpreterBash
	}
	info := execapi.SessionInfo{ID: execapi.NewSessionID(), Runtime: c.Runtime, Network: c.Network,
		Limits:    execapi.Limits{MemoryMB: c.MemoryMB, TimeoutMS: int(c.Timeout.Milliseconds())},
		IdleTTLMS: c.IdleTTL.Milliseconds(), MaxLifetimeMS: c.Lifetime.Milliseconds(),
		CreatedAt: f.now, LastUsedAt: f.now, ExpiresAt: f.now.Add(c.IdleTTL), LifetimeEndsAt: f.now.Add(c.Lifetime),
		State: execapi.SessionIdle, Interpreter: interp, Fork: execapi.ForkFiles, Owner: execapi.CallerFrom(ctx)}
	f.sessions[info.ID] = &fakeSession{info: info, vars: map[string]string{}}
	return info, nil
}

// lookupLocked is the contract's answer for an id: the caller's open
// session, or its ended or lost error, or ErrSessionNotFound.
func (f *fakeSessions) lookupLocked(ctx context.Context, id string) (*fakeSession, error) {
	s, ok := f.sessions[id]
	switch {
	case ok && s.info.Owner == execapi.CallerFrom(ctx):
		return s, nil
	case ok:
		return nil, execapi.ErrSessionNotFound
	case f.lost[id]:
		return nil, &execapi.SessionLostError{Worker: "w1", Why: "test"}
	}
	if end, ok := f.ended[id]; ok {
		return nil, &execapi.SessionEndedError{End: end}
	}
	return nil, execapi.ErrSessionNotFound
}

func (f *fakeSessions) ExecInSession(ctx context.Context, ref execapi.SessionRef, c execapi.Checked, events execapi.EventSink) (execapi.SessionResult, error) {
	f.mu.Lock()
	s, err := f.lookupLocked(ctx, ref.ID)
	if err != nil {
		f.mu.Unlock()
		return execapi.SessionResult{}, err
	}
	f.checked = append(f.checked, c)
	s.calls++
	interp := execapi.InterpreterKept
	if s.calls == 1 {
		interp = execapi.InterpreterStarted
	}
	var res execapi.Result
	cmd, arg, _ := strings.Cut(c.Code, " ")
	switch cmd {
	case "set":
		k, v, _ := strings.Cut(arg, "=")
		s.vars[k] = v
		res = execapitest.Success("")
	case "get":
		res = execapitest.Success(s.vars[arg] + "\n")
	case "echo":
		res = execapitest.Success(arg + "\n")
	case "png":
		res = execapitest.Success("")
		res.Files = map[string]string{arg: base64.StdEncoding.EncodeToString(tinyPNG())}
	case "wait":
		f.mu.Unlock()
		if events != nil {
			events(execapi.Event{Kind: execapi.EventStarted})
			events(execapi.Event{Kind: execapi.EventStdout, Data: []byte("running\n")})
		}
		<-ctx.Done()
		f.cancelled <- ctx.Err()
		return execapi.SessionResult{}, ctx.Err()
	default:
		res = execapitest.Success("")
	}
	sr := execapi.SessionResult{Result: res, Session: execapi.SessionCallInfo{ID: ref.ID, ExpiresAt: s.info.ExpiresAt, Interpreter: interp}}
	if cmd == "oom" {
		// The session's memory limit: the call is killed and the session
		// ends with it, purged.
		sr.Result = execapi.Result{ExitCode: 137, Outcome: execapi.OutcomeMemoryLimit}
		end := execapi.SessionEnd{Reason: execapi.EndMemoryLimit, At: f.now, StatePurged: true}
		sr.Session.Ended = &end
		delete(f.sessions, ref.ID)
		f.ended[ref.ID] = end
	}
	f.mu.Unlock()
	sr.FinishInSession()
	return sr, nil
}

func (f *fakeSessions) Session(ctx context.Context, ref execapi.SessionRef) (execapi.SessionInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.lookupLocked(ctx, ref.ID)
	if err != nil {
		return execapi.SessionInfo{}, err
	}
	return s.info, nil
}

func (f *fakeSessions) ListSessions(ctx context.Context) ([]execapi.SessionInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	var out []execapi.SessionInfo
	for _, s := range f.sessions {
		if s.info.Owner == execapi.CallerFrom(ctx) {
			out = append(out, s.info)
		}
	}
	return out, nil
}

func (f *fakeSessions) CloseSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionEnd, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.lookupLocked(ctx, ref.ID); err != nil {
		return execapi.SessionEnd{}, err
	}
	delete(f.sessions, ref.ID)
	end := execapi.SessionEnd{Reason: execapi.EndDeleted, At: f.now, StatePurged: true}
	f.ended[ref.ID] = end
	return end, nil
}

func (f *fakeSessions) ReadSessionFile(ctx context.Context, ref execapi.SessionRef, path string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if _, err := f.lookupLocked(ctx, ref.ID); err != nil {
		return nil, err
	}
	return nil, execapi.ErrSessionFileNotFound
}

func (f *fakeSessions) WriteSessionFile(ctx context.Context, ref execapi.SessionRef, _ string, _ []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := f.lookupLocked(ctx, ref.ID)
	return err
}

func (f *fakeSessions) ForkSession(context.Context, execapi.SessionRef) (execapi.SessionInfo, error) {
	return execapi.SessionInfo{}, execapi.ErrForkUnsupported
}

// end ends a session as the engine would (idle TTL, say), or marks it
// lost with its worker.
func (f *fakeSessions) end(id string, reason execapi.SessionEndReason) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sessions, id)
	f.ended[id] = execapi.SessionEnd{Reason: reason, At: f.now, StatePurged: true}
}

func (f *fakeSessions) lose(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sessions, id)
	f.lost[id] = true
}

// asked reports how many times the tools listed sessions and read a file.
func (f *fakeSessions) asked() (lists, reads int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists, f.reads
}

func (f *fakeSessions) lastChecked() execapi.Checked {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.checked) == 0 {
		panic(fmt.Sprint("no call reached ExecInSession"))
	}
	return f.checked[len(f.checked)-1]
}
