package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// sessionSpec is what a new session's sandbox is made of.
type sessionSpec struct {
	rt       images.Resolved
	memoryMB int
	timeout  time.Duration
	network  string
	idleTTL  time.Duration
	lifetime time.Duration
	env      map[string]string
	// forkedFrom and create, for a fork: the parent's id and its Fork.
	forkedFrom string
	create     func(context.Context, sandbox.Config) (sandbox.Sandbox, error)
	// inherit, for a fork, gives the new session what it holds of its
	// parent before it is registered: no call can come between.
	inherit func(*session)
}

// OpenSession implements execapi.SessionService: a session sandbox made
// as a call's is (image, limits, network slot), admitted as a call that
// starts a sandbox, bound to the caller.
func (e *Engine) OpenSession(ctx context.Context, c execapi.CheckedSession) (execapi.SessionInfo, error) {
	if !e.cfg.Sessions.Policy.Enabled {
		return execapi.SessionInfo{}, errSessionsOff
	}
	rt, err := e.store.Resolve(c.Runtime)
	if err != nil {
		return execapi.SessionInfo{}, &execapi.Refusal{Reason: execapi.RefusedUnknownRuntime, Field: "runtime", Detail: err.Error()}
	}
	return e.startSession(ctx, sessionSpec{rt: rt, memoryMB: c.MemoryMB, timeout: c.Timeout, network: c.Network,
		idleTTL: c.IdleTTL, lifetime: c.Lifetime, env: c.Env})
}

// startSession reserves a place for a session of the caller's, creates
// its sandbox and registers it.
func (e *Engine) startSession(ctx context.Context, sp sessionSpec) (execapi.SessionInfo, error) {
	r := e.sessions
	owner := execapi.CallerFrom(ctx)
	if err := r.reserve(owner); err != nil {
		return execapi.SessionInfo{}, err
	}
	s, err := e.createSession(ctx, owner, sp)
	if err != nil {
		r.unreserve(owner)
		return execapi.SessionInfo{}, err
	}
	if err := r.add(s); err != nil {
		return execapi.SessionInfo{}, err
	}
	return r.snapshot(s), nil
}

// createSession admits and creates the sandbox of a new session. The
// ticket is held only while the sandbox is made: from then on its memory
// is in admission's gauge, as a running call's is.
func (e *Engine) createSession(ctx context.Context, owner string, sp sessionSpec) (*session, error) {
	ticket, err := e.adm.Acquire(ctx, owner, sp.timeout)
	if err != nil {
		return nil, admissionError(err)
	}
	defer ticket.Release(0)
	key := execapi.PoolKey{Runtime: sp.rt.Runtime.Name, Network: sp.network}
	cfg, err := e.sandboxConfig(sp.rt, key, int64(sp.memoryMB)<<20, false, false)
	if err != nil {
		return nil, err
	}
	cfg.Session = true
	create := sp.create
	if create == nil {
		create = e.backend.Create
	}
	l, err := e.leaseWith(ctx, key, cfg, create)
	if err != nil {
		return nil, err
	}
	ss, ok := sandbox.SandboxAs[sandbox.Session](l.sb)
	if !ok {
		e.release(l)
		return nil, fmt.Errorf("the %s isolation level cannot hold sessions", e.backend.Name())
	}
	fork := execapi.ForkNone
	if f, ok := sandbox.SandboxAs[sandbox.Forker](l.sb); ok {
		fork = f.ForkKind()
	}
	now := e.sessions.now()
	s := &session{
		id: execapi.NewSessionID(), owner: owner, rt: sp.rt, l: l, ss: ss, idleTTL: sp.idleTTL,
		lifeEnds: now.Add(sp.lifetime), env: sp.env, turn: make(chan struct{}, 1), done: make(chan struct{}),
		kernels: map[string]kernelState{},
	}
	if sp.inherit != nil {
		sp.inherit(s)
	}
	s.info = execapi.SessionInfo{
		ID: s.id, Runtime: sp.rt.Runtime.Name, Network: sp.network,
		Limits:    execapi.Limits{TimeoutMS: int(sp.timeout.Milliseconds()), MemoryMB: sp.memoryMB},
		IdleTTLMS: sp.idleTTL.Milliseconds(), MaxLifetimeMS: sp.lifetime.Milliseconds(),
		CreatedAt: now, LastUsedAt: now, LifetimeEndsAt: s.lifeEnds,
		Interpreter: interpreterOf(sp.rt.Runtime), Fork: fork, ForkedFrom: sp.forkedFrom, Owner: owner,
	}
	return s, nil
}

// admissionError is what a call that admission did not let in returns.
func admissionError(err error) error {
	var refusal *execapi.Refusal
	if errors.As(err, &refusal) {
		return err
	}
	return fmt.Errorf("waiting for room to start a sandbox: %w", err)
}

// interpreterOf is what a session of rt keeps of its interpreter.
func interpreterOf(rt images.Runtime) string {
	switch rt.Session {
	case images.SessionPython:
		return execapi.InterpreterPython
	case images.SessionNode:
		return execapi.InterpreterNode
	case images.SessionBash:
		return execapi.InterpreterBash
	}
	return execapi.InterpreterNone
}

// ListSessions implements execapi.SessionService.
func (e *Engine) ListSessions(ctx context.Context) ([]execapi.SessionInfo, error) {
	return e.listSessions(ctx, false)
}

// AllSessions implements execapi.SessionAdmin.
func (e *Engine) AllSessions(ctx context.Context) ([]execapi.SessionInfo, error) {
	return e.listSessions(ctx, true)
}

func (e *Engine) listSessions(ctx context.Context, all bool) ([]execapi.SessionInfo, error) {
	r := e.sessions
	if !r.cfg.Policy.Enabled {
		return nil, errSessionsOff
	}
	out := []execapi.SessionInfo{}
	for _, s := range r.open(execapi.CallerFrom(ctx), all) {
		out = append(out, r.snapshot(s))
	}
	sortSessions(out)
	return out, nil
}

// CloseSession implements execapi.SessionService: the session ends
// (EndDeleted), a call it runs is cancelled, and its sandbox is torn down
// before this returns.
func (e *Engine) CloseSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionEnd, error) {
	s, err := e.sessions.lookup(ctx, ref.ID, false)
	if err != nil {
		return execapi.SessionEnd{}, err
	}
	return e.sessions.endNow(s, execapi.EndDeleted), nil
}

// EndSession implements execapi.SessionAdmin: as CloseSession, whoever
// owns it, with EndOperator.
func (e *Engine) EndSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionEnd, error) {
	s, err := e.sessions.lookup(ctx, ref.ID, true)
	if err != nil {
		return execapi.SessionEnd{}, err
	}
	return e.sessions.endNow(s, execapi.EndOperator), nil
}
