package httpapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// gate is the execapi.Service that both front ends of the server (REST and
// MCP) hold: it validates, applies the caller's key (active, within its rate
// and concurrency, counted in the key store across front ends), runs the
// call on the engine (whose admission decides when it starts, or refuses
// it) and accounts for it. The caller is whoever execapi.CallerFrom names
// (an API key's id; empty when the server runs without keys).
type gate struct {
	svc execapi.Service
	// checked is svc when it takes checked requests (the engine), else nil.
	checked execapi.CheckedExecutor
	policy  execapi.Policy
	keys    accounts
	// limits applies keys' rate and concurrency through the store, so that
	// they hold across every front end sharing it.
	limits *store.Limiter
	// calls counts the calls in the gate (waiting or running), which a
	// drain waits for.
	calls *inFlight
	// queueWait is the engine's longest wait for admission, which bounds
	// how long a call may hold its key's slot.
	queueWait time.Duration
	// recordWait bounds each write of a usage or refusal row.
	recordWait time.Duration
	m          *metrics
	drain      *drainState
	log        *slog.Logger
	// runs cancels every run when the server gives up draining.
	runs context.Context
	// lastClean is when a run last ended with its teardown verified
	// (UnixNano), which readiness counts as proof the engine works.
	lastClean atomic.Int64
}

var _ execapi.Service = (*gate)(nil)

// AdmitSession implements mcpserver.SessionAdmitter (mcp_sessions_test.go
// checks that it does): opening an MCP session
// counts against the caller's key as one run does against its rate (a
// token is spent, a key at its rate is refused with key_rate and
// Retry-After, and the refusal is recorded), and takes none of its
// concurrency, since a session is no call in flight. So a key limited to N
// runs a minute opens at most N sessions a minute, and its sessions and
// runs together stay within its rate.
func (g *gate) AdmitSession(ctx context.Context) error {
	caller := execapi.CallerFrom(ctx)
	if g.drain.isDraining() {
		return g.refuseCall(ctx, caller, &execapi.Refusal{Reason: execapi.RefusedDraining})
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

// Describe implements execapi.Service.
func (g *gate) Describe(ctx context.Context) (execapi.Info, error) { return g.svc.Describe(ctx) }

// Exec implements execapi.Executor. It validates req once, against the
// engine's policy, before the call waits for anything: bad input never
// waits, counts or runs; a refusal is an *execapi.Refusal; the error of a run
// that went ahead is the engine's. An engine that takes a Checked
// (execapi.CheckedExecutor) gets the checked request, not req again.
//
// A call the server cancelled because it gave up draining ends in a
// *shutDownError, which its answer tells apart from other cancellations.
func (g *gate) Exec(ctx context.Context, req execapi.Request, events execapi.EventSink) (execapi.Result, error) {
	return g.execAs(ctx, req, events, payerKey)
}

// execAs is Exec for a call whose limits are payer's; a call the server
// cancelled because it gave up draining ends in a *shutDownError.
func (g *gate) execAs(ctx context.Context, req execapi.Request, events execapi.EventSink, payer payer) (execapi.Result, error) {
	res, err := g.exec(ctx, req, events, payer)
	return res, markShutDown(g.runs, err)
}

// exec is Exec for a call whose limits are payer's.
func (g *gate) exec(ctx context.Context, req execapi.Request, events execapi.EventSink, payer payer) (execapi.Result, error) {
	caller := execapi.CallerFrom(ctx)
	if g.drain.isDraining() {
		return execapi.Result{}, g.refuseCall(ctx, caller, &execapi.Refusal{Reason: execapi.RefusedDraining})
	}
	checked, err := g.policy.Validate(req)
	if err != nil {
		g.m.rejections.add(reasonInvalidRequest)
		return execapi.Result{}, err
	}
	return g.run(ctx, checked, payer, events, func(ctx context.Context, observe execapi.EventSink) (execapi.Result, error) {
		if g.checked != nil {
			return g.checked.ExecChecked(ctx, checked, observe)
		}
		return g.svc.Exec(ctx, req, observe)
	})
}

// run is a checked call through the key's limits and accounting: call
// runs it on the service (a plain call, or one in a session), and every
// run is held, counted and recorded alike.
func (g *gate) run(ctx context.Context, checked execapi.Checked, payer payer, events execapi.EventSink, call func(context.Context, execapi.EventSink) (execapi.Result, error)) (execapi.Result, error) {
	caller := execapi.CallerFrom(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(g.runs, cancel)()
	// The key's slot is held from before the queue until the run ends: the
	// longest that can be is the queue wait, the timeout and teardown.
	permit, err := g.admitKey(ctx, caller, payer, g.queueWait+checked.Timeout+teardownAllowance)
	if err != nil {
		return execapi.Result{}, err
	}
	// Whatever way this call ends, its slot goes back (only once: a run
	// releases it below, keeping its token), or it would be renewed for as
	// long as this process lives.
	defer permit.Release(false)
	// Counted until the call is fully accounted for: a drain waits for
	// that too. (The key's concurrency is the store's, not counted here.)
	fl, _ := g.calls.enter(caller, 0, checked.Timeout)
	var ran time.Duration
	defer func() { g.calls.leave(fl, ran) }()

	// The engine says when its admission let the call in: the wait before
	// it is the queue's, the time after it the run's.
	received := time.Now()
	var admittedNanos atomic.Int64
	observe := func(ev execapi.Event) {
		if ev.Kind == execapi.EventAdmitted {
			admittedNanos.CompareAndSwap(0, time.Now().UnixNano())
		}
		if events != nil {
			events(ev)
		}
	}
	markCalled(ctx)
	res, err := call(ctx, observe)
	started := received
	if n := admittedNanos.Load(); n != 0 {
		started = time.Unix(0, n)
		g.m.queueSeconds.Observe(started.Sub(received).Seconds())
	}
	var refusal *execapi.Refusal
	if refused := errors.As(err, &refusal); refused || execapi.IsValidation(err) {
		// The engine knows more than the policy (installed runtimes, room
		// on the machine) and may refuse too: still nothing ran, so it
		// neither counts against the key nor is a run.
		reason := reasonInvalidRequest
		if refused && !execapi.IsValidation(err) {
			reason = string(refusal.Reason)
			g.refuseCall(ctx, caller, refusal)
		} else {
			g.m.rejections.add(reason)
		}
		return execapi.Result{}, err
	}
	ran = time.Since(started)
	permit.Release(true) // before accounting: the slot is free once the run is
	outcome := classify(ctx, res, err)
	g.m.runs.WithLabelValues(checked.Runtime, outcome).Inc()
	g.m.runSeconds.WithLabelValues(checked.Runtime).Observe(ran.Seconds())
	if err == nil && res.StatePurged {
		g.lastClean.Store(time.Now().UnixNano())
	}
	u := store.Usage{
		KeyID: caller, Runtime: checked.Runtime, Worker: execapi.WorkerOf(res, err), Started: started, Duration: ran,
		ExitCode: -1, Outcome: outcome, BytesIn: bytesIn(checked),
	}
	if err == nil {
		u.ExitCode, u.BytesOut = res.ExitCode, bytesOut(res)
	}
	// Accounting outlives a caller that went away (the run happened), but
	// not a key store that does not answer.
	g.record(ctx, "usage not recorded", caller, func(ctx context.Context) error { return g.keys.RecordUsage(ctx, u) })
	return res, err
}

// admitKey applies the caller's key on every call, so that a revoked key
// stops at once (also on MCP sessions opened before it was revoked) on
// every front end, and takes a token of its rate and a slot of its
// concurrency in the key store, which every front end sharing the store
// counts together. No caller (a server without keys) and the operator
// (payerOperator) have no limits and a nil permit.
func (g *gate) admitKey(ctx context.Context, caller string, payer payer, bound time.Duration) (*store.Permit, error) {
	if payer == payerOperator {
		return nil, nil
	}
	permit, err := g.limits.Admit(ctx, caller, bound)
	var limit *store.LimitError
	switch {
	case err == nil:
		return permit, nil
	case errors.Is(err, store.ErrNotFound):
		g.m.rejections.add(reasonUnauthorized)
		return nil, errUnauthorized
	case errors.As(err, &limit):
		reason := execapi.RefusedKeyRate
		if limit.Limit == store.LimitConcurrency {
			reason = execapi.RefusedKeyConcurrency
		}
		return nil, g.refuseCall(ctx, caller, &execapi.Refusal{Reason: reason, RetryAfter: limit.RetryAfter, Limit: limit.Max})
	default:
		return nil, fmt.Errorf("apply the caller's key: %w", err)
	}
}

// refuse counts a refusal under its reason and returns it.
func (g *gate) refuse(r *execapi.Refusal) *execapi.Refusal {
	g.m.rejections.add(string(r.Reason))
	return r
}

// refuseCall is refuse for a call whose caller is known: the refusal is
// also counted against the caller in the key store, where the console
// shows a key's refused calls beside its runs' outcomes.
func (g *gate) refuseCall(ctx context.Context, caller string, r *execapi.Refusal) *execapi.Refusal {
	// Counted whether or not the caller waits for the answer: the call was
	// made and refused.
	at := time.Now()
	g.record(ctx, "refusal not recorded", caller, func(ctx context.Context) error {
		return g.keys.RecordRefusal(ctx, caller, string(r.Reason), at)
	}, "reason", r.Reason)
	return g.refuse(r)
}

// record makes one accounting write, whether or not the caller still waits
// (ctx's cancellation is dropped), within g.recordWait: a key store that
// hangs (a PostgreSQL server gone silent) must not pin the handler, its
// key's slot or a drain. A write cut off is logged as lost.
func (g *gate) record(ctx context.Context, msg, caller string, write func(context.Context) error, attrs ...any) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.recordWait)
	defer cancel()
	err := write(ctx)
	if err == nil {
		return
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("the key store did not answer within %s: %w", g.recordWait, err)
	}
	g.log.Error(msg, append([]any{"key", caller, "err", err}, attrs...)...)
}

// Classifications of calls that produced no Result, beside the outcomes of
// those that did (execapi.Outcome), for metrics and usage rows.
const (
	outcomeCancelled = "cancelled" // the caller went away, or the server gave up draining
	outcomeError     = "error"     // the sandbox failed
	// outcomeWorkerLost: a cluster's worker was lost with the call, which
	// may have run (execapi.WorkerLostError).
	outcomeWorkerLost = "worker_lost"
)

// classify names a call's outcome for metrics and usage: the Result's own,
// or, when there is none, why not.
func classify(ctx context.Context, res execapi.Result, err error) string {
	var lost *execapi.WorkerLostError
	switch {
	case err != nil && ctx.Err() != nil:
		return outcomeCancelled
	case errors.As(err, &lost):
		return outcomeWorkerLost
	case err != nil:
		return outcomeError
	default:
		return string(res.Outcome)
	}
}

// bytesIn is the payload a request carried into the sandbox.
func bytesIn(c execapi.Checked) int64 {
	n := int64(len(c.Code))
	for _, f := range c.Files {
		n += int64(len(f.Data))
	}
	for k, v := range c.Env {
		n += int64(len(k) + len(v))
	}
	return n
}

// bytesOut is the payload a result carried out: output and decoded files.
func bytesOut(r execapi.Result) int64 {
	n := int64(len(r.Stdout) + len(r.Stderr))
	for _, b64 := range r.Files {
		n += int64(base64.StdEncoding.DecodedLen(len(b64)) - strings.Count(b64[max(0, len(b64)-2):], "="))
	}
	return n
}
