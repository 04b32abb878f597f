package main

import (
	"context"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// trackedSessions is trackedService over a local engine whose sessions
// are on (`scratchrun mcp --sessions`): the session tools need the
// engine's SessionService and its Policy, which trackedService's
// embedding hides, and a run in a session is a run shutdown waits for
// as any other. The sessions have no store: an id is unknown once the
// process ends.
type trackedSessions struct {
	*trackedService
	ss execapi.SessionService
	ce execapi.CheckedExecutor
}

var (
	_ execapi.CheckedExecutor = trackedSessions{}
	_ execapi.SessionService  = trackedSessions{}
)

// withSessions returns t, or t with svc's sessions when svc holds them and
// they are on; off, the MCP server sees exactly what it saw before
// sessions existed.
func withSessions(t *trackedService, svc execapi.Service) execapi.Service {
	ss, ok := svc.(execapi.SessionService)
	ce, checked := svc.(execapi.CheckedExecutor)
	if !ok || !checked || !ss.SessionPolicy().Enabled {
		return t
	}
	return trackedSessions{trackedService: t, ss: ss, ce: ce}
}

// track runs f under t's wait group, cancelled when t's base ends.
func (t trackedSessions) track(ctx context.Context, f func(context.Context)) {
	t.wg.Add(1)
	defer t.wg.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	unhook := context.AfterFunc(t.base, cancel)
	defer unhook()
	f(ctx)
}

// Policy is the engine's.
func (t trackedSessions) Policy() execapi.Policy { return t.ce.Policy() }

// ExecChecked runs a checked request, tracked.
func (t trackedSessions) ExecChecked(ctx context.Context, c execapi.Checked, events execapi.EventSink) (res execapi.Result, err error) {
	t.track(ctx, func(ctx context.Context) { res, err = t.ce.ExecChecked(ctx, c, events) })
	return res, err
}

// SessionPolicy is the engine's.
func (t trackedSessions) SessionPolicy() execapi.SessionPolicy { return t.ss.SessionPolicy() }

// OpenSession opens a session, tracked: it starts a sandbox.
func (t trackedSessions) OpenSession(ctx context.Context, c execapi.CheckedSession) (info execapi.SessionInfo, err error) {
	t.track(ctx, func(ctx context.Context) { info, err = t.ss.OpenSession(ctx, c) })
	return info, err
}

// ForkSession forks a session, tracked: it starts a sandbox.
func (t trackedSessions) ForkSession(ctx context.Context, ref execapi.SessionRef) (info execapi.SessionInfo, err error) {
	t.track(ctx, func(ctx context.Context) { info, err = t.ss.ForkSession(ctx, ref) })
	return info, err
}

// ExecInSession runs in a session, tracked.
func (t trackedSessions) ExecInSession(ctx context.Context, ref execapi.SessionRef, c execapi.Checked, events execapi.EventSink) (res execapi.SessionResult, err error) {
	t.track(ctx, func(ctx context.Context) { res, err = t.ss.ExecInSession(ctx, ref, c, events) })
	return res, err
}

// Session is the engine's.
func (t trackedSessions) Session(ctx context.Context, ref execapi.SessionRef) (execapi.SessionInfo, error) {
	return t.ss.Session(ctx, ref)
}

// ListSessions is the engine's.
func (t trackedSessions) ListSessions(ctx context.Context) ([]execapi.SessionInfo, error) {
	return t.ss.ListSessions(ctx)
}

// CloseSession is the engine's.
func (t trackedSessions) CloseSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionEnd, error) {
	return t.ss.CloseSession(ctx, ref)
}

// ReadSessionFile is the engine's.
func (t trackedSessions) ReadSessionFile(ctx context.Context, ref execapi.SessionRef, path string) ([]byte, error) {
	return t.ss.ReadSessionFile(ctx, ref, path)
}

// WriteSessionFile is the engine's.
func (t trackedSessions) WriteSessionFile(ctx context.Context, ref execapi.SessionRef, path string, data []byte) error {
	return t.ss.WriteSessionFile(ctx, ref, path, data)
}
