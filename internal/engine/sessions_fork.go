package engine

import (
	"context"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// ForkSession implements execapi.SessionService: between calls, a new
// session of the caller's is made from a copy of this one's sandbox
// (sandbox.Forker), with its limits, network and TTLs (its lifetime
// counted afresh); ErrForkUnsupported on a level that cannot copy one.
func (e *Engine) ForkSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionInfo, error) {
	r := e.sessions
	s, err := r.lookup(ctx, ref.ID, false)
	if err != nil {
		return execapi.SessionInfo{}, err
	}
	forker, ok := sandbox.SandboxAs[sandbox.Forker](s.l.sb)
	if !ok {
		return execapi.SessionInfo{}, execapi.ErrForkUnsupported
	}
	if err := r.take(ctx, s, nil); err != nil {
		return execapi.SessionInfo{}, err
	}
	defer r.give(s)
	r.mu.Lock()
	info := s.info
	r.mu.Unlock()
	kind := forker.ForkKind()
	return e.startSession(ctx, sessionSpec{
		rt: s.rt, memoryMB: info.Limits.MemoryMB, timeout: time.Duration(info.Limits.TimeoutMS) * time.Millisecond,
		network: info.Network, idleTTL: s.idleTTL, lifetime: time.Duration(info.MaxLifetimeMS) * time.Millisecond,
		env: s.env, forkedFrom: s.id, create: forker.Fork,
		inherit: func(c *session) { inherit(c, s, kind) },
	})
}

// inherit gives the fork c what it holds of its parent p (whose turn the
// caller holds; c is not registered yet): its call count, so that the
// fork's cells are numbered on from the parent's (a traceback through a
// function the parent defined names its own cell), and, when memory was
// copied, what p knew of its kernels, which run on in the copy.
func inherit(c, p *session, kind string) {
	c.calls = p.calls
	if kind == execapi.ForkMemory {
		for key, k := range p.kernels {
			c.kernels[key] = k
		}
	}
}
