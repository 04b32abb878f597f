package worker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// sessionOp runs one session operation on the engine's SessionService
// and encodes its answer. What the front end checked is held to the
// worker's own policies again: a front end's view of the limits is not
// trusted, as for calls.
func (w *Worker) sessionOp(ctx context.Context, c *call, body []byte) ([]byte, error) {
	s := w.cfg.Sessions
	var op cluster.SessionOp
	if err := json.Unmarshal(body, &op); err != nil {
		return nil, &execapi.ValidationError{Field: "request", Message: "the front end sent a session operation that is not JSON: " + err.Error()}
	}
	ctx = execapi.WithCaller(ctx, c.caller)
	ref := execapi.SessionRef{ID: op.Session}
	var a cluster.SessionAnswer
	var err error
	switch c.op {
	case cluster.OpSessionOpen:
		if op.Open == nil {
			return nil, &execapi.ValidationError{Field: "request", Message: "an open without its request"}
		}
		if err = w.recheckOpen(*op.Open); err != nil {
			return nil, err
		}
		var info execapi.SessionInfo
		info, err = s.OpenSession(ctx, *op.Open)
		a.Info = &info
	case cluster.OpSessionExec:
		if op.Exec == nil {
			return nil, &execapi.ValidationError{Field: "request", Message: "a call without its request"}
		}
		if err = w.recheckExec(*op.Exec); err != nil {
			return nil, err
		}
		var res execapi.SessionResult
		res, err = s.ExecInSession(ctx, ref, *op.Exec, func(ev execapi.Event) { w.event(c, ev) })
		a.Result = &res
	case cluster.OpSessionGet:
		if err = execapi.ValidatePath("path", op.Path); err != nil {
			return nil, err
		}
		a.Data, err = s.ReadSessionFile(ctx, ref, op.Path)
	case cluster.OpSessionPut:
		if err = execapi.ValidatePath("path", op.Path); err != nil {
			return nil, err
		}
		if limit := w.cfg.Engine.Policy().MaxFileBytes; len(op.Data) > limit {
			return nil, &execapi.ValidationError{Field: "body", Message: fmt.Sprintf("is %d bytes; the limit is %d", len(op.Data), limit)}
		}
		err = s.WriteSessionFile(ctx, ref, op.Path, op.Data)
	case cluster.OpSessionFork:
		var info execapi.SessionInfo
		info, err = s.ForkSession(ctx, ref)
		a.Info = &info
	case cluster.OpSessionList:
		var list []execapi.SessionInfo
		list, err = s.ListSessions(ctx)
		a.List = entries(list)
	case cluster.OpSessionInfo:
		var info execapi.SessionInfo
		info, err = s.Session(ctx, ref)
		a.Info = &info
	case cluster.OpSessionClose:
		var end execapi.SessionEnd
		end, err = s.CloseSession(ctx, ref)
		a.End = &end
	case cluster.OpSessionAll, cluster.OpSessionEnd:
		admin, ok := s.(execapi.SessionAdmin)
		if !ok {
			return nil, errors.New("the worker's engine has no operator's view of its sessions")
		}
		if c.op == cluster.OpSessionAll {
			var list []execapi.SessionInfo
			list, err = admin.AllSessions(ctx)
			a.List = entries(list)
		} else {
			var end execapi.SessionEnd
			end, err = admin.EndSession(ctx, ref)
			a.End = &end
		}
	default:
		return nil, &execapi.ValidationError{Field: "request", Message: "unknown session operation " + c.op}
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(a)
}

// entries are list's sessions with their owners, for the wire.
func entries(list []execapi.SessionInfo) []cluster.SessionEntry {
	out := make([]cluster.SessionEntry, len(list))
	for i, s := range list {
		out[i] = cluster.SessionEntry{SessionInfo: s, Owner: s.Owner}
	}
	return out
}

// recheckOpen holds an open the front end checked to the worker's own
// bounds.
func (w *Worker) recheckOpen(c execapi.CheckedSession) error {
	p, sp := w.cfg.Engine.Policy(), w.cfg.Sessions.SessionPolicy()
	maxMemory := p.MaxMemoryMB
	if sp.MaxMemoryMB > 0 {
		maxMemory = sp.MaxMemoryMB
	}
	switch {
	case !sp.Enabled:
		return &execapi.ValidationError{Field: "runtime", Message: "sessions are off on worker " + w.cfg.ID}
	case c.MemoryMB < p.MinMemoryMB || c.MemoryMB > maxMemory:
		return &execapi.ValidationError{Field: "limits.memory_mb", Message: fmt.Sprintf("is %d; worker %s takes %d to %d", c.MemoryMB, w.cfg.ID, p.MinMemoryMB, maxMemory)}
	case c.Timeout < p.MinTimeout || c.Timeout > p.MaxTimeout:
		return &execapi.ValidationError{Field: "limits.timeout_ms", Message: fmt.Sprintf("is %d; worker %s takes %d to %d", c.Timeout.Milliseconds(), w.cfg.ID, p.MinTimeout.Milliseconds(), p.MaxTimeout.Milliseconds())}
	case c.IdleTTL < execapi.MinSessionTTL || c.IdleTTL > sp.MaxIdleTTL:
		return &execapi.ValidationError{Field: "idle_ttl_ms", Message: fmt.Sprintf("is %d; worker %s takes at most %d", c.IdleTTL.Milliseconds(), w.cfg.ID, sp.MaxIdleTTL.Milliseconds())}
	case c.Lifetime < execapi.MinSessionTTL || c.Lifetime > sp.MaxLifetime:
		return &execapi.ValidationError{Field: "max_lifetime_ms", Message: fmt.Sprintf("is %d; worker %s takes at most %d", c.Lifetime.Milliseconds(), w.cfg.ID, sp.MaxLifetime.Milliseconds())}
	}
	if _, err := p.Validate(execapi.Request{Runtime: c.Runtime, Code: "-", Env: c.Env, Network: c.Network}); err != nil {
		return err
	}
	return nil
}

// recheckExec holds a call in a session, as the front end checked it, to
// the worker's own policy: everything but its memory, which is the
// session's (the engine holds it to that).
func (w *Worker) recheckExec(c execapi.Checked) error {
	req := execapi.Request{Runtime: c.Runtime, Code: c.Code, Limits: execapi.Limits{TimeoutMS: int(c.Timeout.Milliseconds())},
		Env: c.Env, ReturnFiles: slices.Clone(c.ReturnFiles), Network: c.Network}
	if len(c.Files) > 0 {
		req.FilesBase64 = make(map[string]string, len(c.Files))
		for _, f := range c.Files {
			req.FilesBase64[f.Path] = base64.StdEncoding.EncodeToString(f.Data)
		}
	}
	if c.Timeout%1e6 != 0 {
		return &execapi.ValidationError{Field: "limits.timeout_ms", Message: "is not a whole number of milliseconds"}
	}
	_, err := w.cfg.Engine.Policy().Validate(req)
	return err
}
