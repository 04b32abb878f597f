package httpapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// sessionGate is the gate of a server with sessions on, over a service
// that holds them: every front end that type-asserts the server's service
// (Server.Service, the MCP tools) for an execapi.SessionService gets the
// caller's key applied to sessions as to calls. A call in a session is a
// run (the key's rate and concurrency, a usage row); opening, forking and
// file operations spend a token of the key's rate and hold no slot, since
// none is a run in flight; listing and closing spend nothing, so a key at
// its rate can still end what it holds.
type sessionGate struct {
	*gate
	ss execapi.SessionService
}

var _ execapi.SessionService = sessionGate{}

// SessionPolicy implements execapi.SessionService.
func (g sessionGate) SessionPolicy() execapi.SessionPolicy { return g.ss.SessionPolicy() }

// Policy is what the server checks requests against: a front end over
// the gate (the MCP session tools) validates a call in a session with it
// before ExecInSession, which takes a checked request.
func (g sessionGate) Policy() execapi.Policy { return g.policy }

// admitOp lets a session operation in: not while draining, and with a
// token of the caller's rate when spend is set.
func (g sessionGate) admitOp(ctx context.Context, spend bool) error {
	caller := execapi.CallerFrom(ctx)
	if g.drain.isDraining() {
		return g.refuseCall(ctx, caller, &execapi.Refusal{Reason: execapi.RefusedDraining})
	}
	if !spend {
		return nil
	}
	err := g.limits.Spend(ctx, caller)
	var limit *store.LimitError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		g.m.rejections.add(reasonUnauthorized)
		return errUnauthorized
	case errors.As(err, &limit):
		return g.refuseCall(ctx, caller, &execapi.Refusal{Reason: execapi.RefusedKeyRate, RetryAfter: limit.RetryAfter, Limit: limit.Max})
	default:
		return fmt.Errorf("apply the caller's key: %w", err)
	}
}

// refused records a refusal of the service's (a key's or the server's
// maximum of sessions) against the caller, as a refused call is.
func (g sessionGate) refused(ctx context.Context, err error) error {
	var r *execapi.Refusal
	if errors.As(err, &r) && !execapi.IsValidation(err) {
		g.refuseCall(ctx, execapi.CallerFrom(ctx), r)
	}
	return err
}

// OpenSession implements execapi.SessionService.
func (g sessionGate) OpenSession(ctx context.Context, c execapi.CheckedSession) (execapi.SessionInfo, error) {
	if err := g.admitOp(ctx, true); err != nil {
		return execapi.SessionInfo{}, err
	}
	info, err := g.ss.OpenSession(ctx, c)
	return info, g.refused(ctx, err)
}

// ForkSession implements execapi.SessionService: a fork opens a session,
// and is let in as an open is.
func (g sessionGate) ForkSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionInfo, error) {
	if err := g.admitOp(ctx, true); err != nil {
		return execapi.SessionInfo{}, err
	}
	info, err := g.ss.ForkSession(ctx, ref)
	return info, g.refused(ctx, err)
}

// ExecInSession implements execapi.SessionService: the call is a run
// through the key's limits and accounting, as Exec's is.
func (g sessionGate) ExecInSession(ctx context.Context, ref execapi.SessionRef, c execapi.Checked, events execapi.EventSink) (execapi.SessionResult, error) {
	if g.drain.isDraining() {
		return execapi.SessionResult{}, g.refuseCall(ctx, execapi.CallerFrom(ctx), &execapi.Refusal{Reason: execapi.RefusedDraining})
	}
	var sr execapi.SessionResult
	_, err := g.run(ctx, c, payerKey, events, func(ctx context.Context, observe execapi.EventSink) (execapi.Result, error) {
		var err error
		sr, err = g.ss.ExecInSession(ctx, ref, c, observe)
		return sr.Result, err
	})
	if err != nil {
		return execapi.SessionResult{}, markShutDown(g.runs, err)
	}
	return sr, nil
}

// Session implements execapi.SessionService. Like listing, it spends
// nothing: it is the look-up before a call, which the call pays for.
func (g sessionGate) Session(ctx context.Context, ref execapi.SessionRef) (execapi.SessionInfo, error) {
	return g.ss.Session(ctx, ref)
}

// ListSessions implements execapi.SessionService.
func (g sessionGate) ListSessions(ctx context.Context) ([]execapi.SessionInfo, error) {
	return g.ss.ListSessions(ctx)
}

// CloseSession implements execapi.SessionService. It is let in while
// draining too: ending a session frees what the drain waits to free.
func (g sessionGate) CloseSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionEnd, error) {
	return g.ss.CloseSession(ctx, ref)
}

// ReadSessionFile implements execapi.SessionService.
func (g sessionGate) ReadSessionFile(ctx context.Context, ref execapi.SessionRef, path string) ([]byte, error) {
	if err := g.admitOp(ctx, true); err != nil {
		return nil, err
	}
	return g.ss.ReadSessionFile(ctx, ref, path)
}

// WriteSessionFile implements execapi.SessionService.
func (g sessionGate) WriteSessionFile(ctx context.Context, ref execapi.SessionRef, path string, data []byte) error {
	if err := g.admitOp(ctx, true); err != nil {
		return err
	}
	return g.ss.WriteSessionFile(ctx, ref, path, data)
}

// Describe implements execapi.Service: the service's description, saying
// that sessions are on and their bounds.
func (g sessionGate) Describe(ctx context.Context) (execapi.Info, error) {
	info, err := g.gate.Describe(ctx)
	if err != nil {
		return info, err
	}
	sp := g.ss.SessionPolicy()
	sp.Enabled = true // the server offers them: Config.Sessions
	info.Sessions = sp.Info()
	if info.Sessions.MaxMemoryMB == 0 {
		info.Sessions.MaxMemoryMB = g.policy.MaxMemoryMB // a call's, as ValidateSession holds it
	}
	return info, nil
}

// SessionsOffered reports whether svc holds sessions and its policy has
// them on: what Config.Sessions of a server over it should be.
func SessionsOffered(svc execapi.Service) bool {
	ss, ok := svc.(execapi.SessionService)
	return ok && ss.SessionPolicy().Enabled
}
