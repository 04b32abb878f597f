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
// MCP) hold: it validates, applies the caller's key limits (rate and
// concurrency), runs the call on the engine (whose admission decides when
// it starts, or refuses it) and accounts for it. The caller is whoever
// execapi.CallerFrom names (an API key's id; empty when the server runs
// without keys).
type gate struct {
	svc execapi.Service
	// checked is svc when it takes checked requests (the engine), else nil.
	checked execapi.CheckedExecutor
	policy  execapi.Policy
	keys    *store.Store
	calls   *inFlight
	rate    *rateLimiter
	m       *metrics
	drain   *drainState
	log     *slog.Logger
	// runs cancels every run when the server gives up draining.
	runs context.Context
	// lastClean is when a run last ended with its teardown verified
	// (UnixNano), which readiness counts as proof the engine works.
	lastClean atomic.Int64
}

var _ execapi.Service = (*gate)(nil)

// Describe implements execapi.Service.
func (g *gate) Describe(ctx context.Context) (execapi.Info, error) { return g.svc.Describe(ctx) }

// keyLimits are a caller's limits; zero means none.
type keyLimits struct{ ratePerMin, concurrency int }

// Exec implements execapi.Executor. It validates req once, against the
// engine's policy, before the call waits for anything: bad input never
// waits, counts or runs; a refusal is an *execapi.Refusal; the error of a run
// that went ahead is the engine's. An engine that takes a Checked
// (execapi.CheckedExecutor) gets the checked request, not req again.
func (g *gate) Exec(ctx context.Context, req execapi.Request, events execapi.EventSink) (execapi.Result, error) {
	if g.drain.isDraining() {
		return execapi.Result{}, g.refuse(&execapi.Refusal{Reason: execapi.RefusedDraining})
	}
	checked, err := g.policy.Validate(req)
	if err != nil {
		g.m.rejections.WithLabelValues(reasonInvalidRequest).Inc()
		return execapi.Result{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(g.runs, cancel)()
	caller := execapi.CallerFrom(ctx)
	limits, err := g.limitsFor(ctx, caller)
	if err != nil {
		return execapi.Result{}, err
	}
	if ok, wait := g.rate.take(caller, limits.ratePerMin); !ok {
		return execapi.Result{}, g.refuse(&execapi.Refusal{Reason: execapi.RefusedKeyRate, RetryAfter: wait, Limit: limits.ratePerMin})
	}
	fl, refusal := g.calls.enter(caller, limits.concurrency, checked.Timeout)
	if refusal != nil {
		g.rate.refund(caller)
		return execapi.Result{}, g.refuse(refusal)
	}
	// Counted until the call is fully accounted for: a drain waits for
	// that too.
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
	var res execapi.Result
	if g.checked != nil {
		res, err = g.checked.ExecChecked(ctx, checked, observe)
	} else {
		res, err = g.svc.Exec(ctx, req, observe)
	}
	started := received
	if n := admittedNanos.Load(); n != 0 {
		started = time.Unix(0, n)
		g.m.queueSeconds.Observe(started.Sub(received).Seconds())
	}
	if refused := errors.As(err, &refusal); refused || execapi.IsValidation(err) {
		// The engine knows more than the policy (installed runtimes, room
		// on the machine) and may refuse too: still nothing ran, so it
		// neither counts against the key nor is a run.
		g.rate.refund(caller)
		reason := reasonInvalidRequest
		if refused && !execapi.IsValidation(err) {
			reason = string(refusal.Reason)
		}
		g.m.rejections.WithLabelValues(reason).Inc()
		return execapi.Result{}, err
	}
	ran = time.Since(started)
	outcome := classify(ctx, res, err)
	g.m.runs.WithLabelValues(checked.Runtime, outcome).Inc()
	g.m.runSeconds.WithLabelValues(checked.Runtime).Observe(ran.Seconds())
	if err == nil && res.StatePurged {
		g.lastClean.Store(time.Now().UnixNano())
	}
	u := store.Usage{
		KeyID: caller, Runtime: checked.Runtime, Started: started, Duration: ran,
		ExitCode: -1, Outcome: outcome, BytesIn: bytesIn(checked),
	}
	if err == nil {
		u.ExitCode, u.BytesOut = res.ExitCode, bytesOut(res)
	}
	// Accounting outlives a caller that went away: the run happened.
	if rerr := g.keys.RecordUsage(context.WithoutCancel(ctx), u); rerr != nil {
		g.log.Error("usage not recorded", "key", caller, "err", rerr)
	}
	return res, err
}

// limitsFor looks the caller's key up on every run, so that a revoked key
// stops at once (also on MCP sessions opened before it was revoked).
func (g *gate) limitsFor(ctx context.Context, caller string) (keyLimits, error) {
	if caller == "" {
		return keyLimits{}, nil
	}
	k, err := g.keys.KeyByID(ctx, caller)
	if errors.Is(err, store.ErrNotFound) || err == nil && !k.Active() {
		g.m.rejections.WithLabelValues(reasonUnauthorized).Inc()
		return keyLimits{}, errUnauthorized
	}
	if err != nil {
		return keyLimits{}, fmt.Errorf("look up the caller's key: %w", err)
	}
	return keyLimits{ratePerMin: k.RatePerMin, concurrency: k.Concurrency}, nil
}

// refuse counts a refusal under its reason and returns it.
func (g *gate) refuse(r *execapi.Refusal) *execapi.Refusal {
	g.m.rejections.WithLabelValues(string(r.Reason)).Inc()
	return r
}

// Classifications of calls that produced no Result, beside the outcomes of
// those that did (execapi.Outcome), for metrics and usage rows.
const (
	outcomeCancelled = "cancelled" // the caller went away, or the server gave up draining
	outcomeError     = "error"     // the sandbox failed
)

// classify names a call's outcome for metrics and usage: the Result's own,
// or, when there is none, why not.
func classify(ctx context.Context, res execapi.Result, err error) string {
	switch {
	case err != nil && ctx.Err() != nil:
		return outcomeCancelled
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
