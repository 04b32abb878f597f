package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/sandbox"
)

var (
	_ execapi.SessionService = (*Engine)(nil)
	_ execapi.SessionAdmin   = (*Engine)(nil)
)

// errSessionsOff answers every session call of an engine whose sessions
// are off: front ends offer none then (SessionPolicy().Enabled is false),
// so only a caller that skipped that check sees it.
var errSessionsOff = errors.New("sessions are off on this engine (--sessions)")

// session is one open session: its sandbox and what its calls keep.
type session struct {
	id, owner string
	rt        images.Resolved
	l         *leased
	ss        sandbox.Session
	idleTTL   time.Duration
	lifeEnds  time.Time
	// env is the session's own environment, under each call's.
	env map[string]string
	// turn is held (a value sent) by the one call or file operation at a
	// time that uses the sandbox (sandbox.Session is not for concurrent
	// use), and by the teardown.
	turn chan struct{}
	// done is closed once the session is ended and torn down (end set).
	done chan struct{}

	// Guarded by sessions.mu.
	info   execapi.SessionInfo
	busy   bool               // an operation holds turn
	cancel context.CancelFunc // the running call's, when busy with one
	ending execapi.SessionEndReason
	end    execapi.SessionEnd

	// Guarded by turn.
	kernels map[string]kernelState
	calls   int
}

// kernelState is what a session knows of one runtime's kernel.
type kernelState struct {
	ever, alive bool
}

// tombstone remembers an ended session for its owner.
type tombstone struct {
	owner string
	end   execapi.SessionEnd
}

// sessions is the engine's registry of open sessions and of the
// tombstones of ended ones.
type sessions struct {
	e   *Engine
	cfg SessionsConfig
	now func() time.Time

	mu       sync.Mutex
	byID     map[string]*session
	perOwner map[string]int // open and opening, per owner
	total    int            // open and opening
	tombs    map[string]tombstone
	order    []string // tombstone ids, oldest first
	closed   bool

	stop chan struct{}
	wg   sync.WaitGroup
}

// newSessions makes the registry and, when sessions are on, starts its
// sweeper.
func newSessions(e *Engine, cfg SessionsConfig) *sessions {
	if cfg.Interrupt <= 0 {
		cfg.Interrupt = 2 * time.Second
	}
	if cfg.Sweep <= 0 {
		cfg.Sweep = time.Second
	}
	if cfg.Tombstones <= 0 {
		cfg.Tombstones = 4096
	}
	r := &sessions{e: e, cfg: cfg, now: time.Now, byID: map[string]*session{}, perOwner: map[string]int{},
		tombs: map[string]tombstone{}, stop: make(chan struct{})}
	if cfg.Policy.Enabled {
		r.wg.Add(1)
		go r.sweeper()
	}
	return r
}

// SessionPolicy implements execapi.SessionService.
func (e *Engine) SessionPolicy() execapi.SessionPolicy { return e.cfg.Sessions.Policy }

// reserve counts one more session of owner against the maxima, or says
// which refuses it.
func (r *sessions) reserve(owner string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.cfg.Policy
	switch {
	case r.closed:
		return &execapi.Refusal{Reason: execapi.RefusedDraining}
	case p.PerKey > 0 && r.perOwner[owner] >= p.PerKey:
		return &execapi.Refusal{Reason: execapi.RefusedKeySessions, Limit: p.PerKey}
	case p.Max > 0 && r.total >= p.Max:
		return &execapi.Refusal{Reason: execapi.RefusedSessionsFull, Limit: p.Max}
	}
	r.perOwner[owner]++
	r.total++
	return nil
}

// unreserve gives back what reserve counted.
func (r *sessions) unreserve(owner string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unreserveLocked(owner)
}

func (r *sessions) unreserveLocked(owner string) {
	r.total--
	if r.perOwner[owner]--; r.perOwner[owner] <= 0 {
		delete(r.perOwner, owner)
	}
}

// add registers a session whose sandbox is ready; once the engine
// closes it is ended at once instead (EndAllSessions may have looked
// before it was there).
func (r *sessions) add(s *session) error {
	r.mu.Lock()
	r.byID[s.id] = s
	closed := r.closed
	r.mu.Unlock()
	if closed {
		end := r.endNow(s, execapi.EndServerShutdown)
		return &execapi.SessionEndedError{End: end}
	}
	return nil
}

// lookup finds the caller's session id; operator skips the owner check.
// Another caller's session is ErrSessionNotFound, as an unknown id is; the
// caller's ended one is a *SessionEndedError.
func (r *sessions) lookup(ctx context.Context, id string, operator bool) (*session, error) {
	if !r.cfg.Policy.Enabled {
		return nil, errSessionsOff
	}
	caller := execapi.CallerFrom(ctx)
	r.mu.Lock()
	s, ok := r.byID[id]
	if ok && (operator || s.owner == caller) {
		r.mu.Unlock()
		return s, nil
	}
	t, ok := r.tombs[id]
	r.mu.Unlock()
	if ok && !operator && t.owner == caller {
		return nil, &execapi.SessionEndedError{End: t.end}
	}
	return nil, execapi.ErrSessionNotFound
}

// take holds s's turn for one operation, waiting at most until ctx ends;
// call (nil for a file operation) is the cancel of a call, which ending
// the session uses. A session that ended (or is ending) meanwhile is its
// *SessionEndedError once its teardown is done.
func (r *sessions) take(ctx context.Context, s *session, call context.CancelFunc) error {
	select {
	case s.turn <- struct{}{}:
	case <-s.done:
		return &execapi.SessionEndedError{End: s.end}
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	r.mu.Lock()
	if s.ending != "" {
		r.mu.Unlock()
		<-s.turn
		<-s.done
		return &execapi.SessionEndedError{End: s.end}
	}
	s.busy, s.cancel = true, call
	r.mu.Unlock()
	return nil
}

// give ends an operation: the session counts as used now.
func (r *sessions) give(s *session) {
	r.mu.Lock()
	s.busy, s.cancel = false, nil
	s.info.LastUsedAt = r.now()
	r.mu.Unlock()
	<-s.turn
}

// startEnd marks s as ending for reason (the first reason wins) and
// cancels its running call; it reports whether this call is the one
// that must finish it (finishEnd). onlyIdle refuses a busy session.
func (r *sessions) startEnd(s *session, reason execapi.SessionEndReason, onlyIdle bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.ending != "" || r.byID[s.id] != s || (onlyIdle && s.busy) {
		return false
	}
	s.ending = reason
	if s.cancel != nil {
		s.cancel()
	}
	return true
}

// finishEnd tears down an ending session once nothing uses it, and
// leaves its tombstone: the session's end, with whether its teardown
// verifiably left nothing.
func (r *sessions) finishEnd(s *session) execapi.SessionEnd {
	s.turn <- struct{}{}
	t := r.e.release(s.l)
	r.mu.Lock()
	s.end = execapi.SessionEnd{Reason: s.ending, At: r.now(), StatePurged: t.Purged}
	delete(r.byID, s.id)
	r.unreserveLocked(s.owner)
	r.tombs[s.id] = tombstone{owner: s.owner, end: s.end}
	r.order = append(r.order, s.id)
	for len(r.order) > r.cfg.Tombstones {
		delete(r.tombs, r.order[0])
		r.order = r.order[1:]
	}
	r.mu.Unlock()
	close(s.done)
	r.e.log.Info("session ended", "session", s.l.sb.ID(), "reason", string(s.end.Reason), "purged", t.Purged)
	return s.end
}

// endNow ends s for reason and waits for its teardown; when it was
// already ending, it waits for that end instead.
func (r *sessions) endNow(s *session, reason execapi.SessionEndReason) execapi.SessionEnd {
	if r.startEnd(s, reason, false) {
		return r.finishEnd(s)
	}
	<-s.done
	return s.end
}

// endTaken ends s for reason from an operation that holds its turn.
func (r *sessions) endTaken(s *session, reason execapi.SessionEndReason) execapi.SessionEnd {
	mine := r.startEnd(s, reason, false)
	r.mu.Lock()
	s.busy, s.cancel = false, nil
	r.mu.Unlock()
	<-s.turn
	if mine {
		return r.finishEnd(s)
	}
	<-s.done
	return s.end
}

// open lists the sessions open now, of owner unless all.
func (r *sessions) open(owner string, all bool) []*session {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*session
	for _, s := range r.byID {
		if s.ending == "" && (all || s.owner == owner) {
			out = append(out, s)
		}
	}
	return out
}

// sortSessions orders sessions oldest first.
func sortSessions(list []execapi.SessionInfo) {
	slices.SortFunc(list, func(a, b execapi.SessionInfo) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// snapshot is s's SessionInfo now.
func (r *sessions) snapshot(s *session) execapi.SessionInfo {
	r.mu.Lock()
	info := s.info
	busy := s.busy
	r.mu.Unlock()
	info.State = execapi.SessionIdle
	if busy {
		info.State = execapi.SessionRunning
	}
	info.ExpiresAt = execapi.Expiry(info.LastUsedAt, s.idleTTL, s.lifeEnds)
	info.MemoryBytes = s.l.sb.MemoryUsage()
	return info
}

// EndAllSessions ends every open session with reason and waits until
// each is torn down; no session opens after it. Close calls it with
// EndServerShutdown; a worker that drains may call it first.
func (e *Engine) EndAllSessions(reason execapi.SessionEndReason) {
	r := e.sessions
	r.mu.Lock()
	first := !r.closed
	r.closed = true
	r.mu.Unlock()
	if first {
		close(r.stop)
	}
	r.wg.Wait()
	r.mu.Lock()
	var all []*session
	for _, s := range r.byID {
		all = append(all, s)
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Go(func() { r.endNow(s, reason) })
	}
	wg.Wait()
}
