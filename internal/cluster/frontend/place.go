package frontend

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Backoff between rounds of tries when every worker refused: short at
// first (a sandbox frees within tens of milliseconds on a busy worker),
// never longer than a few heartbeats' news.
const (
	firstBackoff = 20 * time.Millisecond
	maxBackoff   = 100 * time.Millisecond
	// noWorkersRetry is the Retry-After of a call no live worker could take.
	noWorkersRetry = 2 * time.Second
)

// Exec implements execapi.Executor: the request (with the front end's
// defaults filled in) goes to one worker that offers its runtime, chosen
// by the power of K choices and tried in turn while workers refuse, for
// up to the queue wait. A refusal from every worker is a *execapi.Refusal
// with the soonest Retry-After they gave; a runtime no live worker offers
// is one naming the runtime (400); no live worker at all is
// RefusedNoWorkers. Once a worker has the go, its loss is an
// *execapi.WorkerLostError: the call is never sent to another.
func (f *Frontend) Exec(ctx context.Context, req execapi.Request, events execapi.EventSink) (execapi.Result, error) {
	received := time.Now()
	req = f.cfg.Policy.WithDefaults(req)
	body, err := json.Marshal(req)
	if err != nil {
		return execapi.Result{}, fmt.Errorf("encode the request: %w", err)
	}
	parts := cluster.Split(body, cluster.PartSize(f.nc.MaxPayload()))
	var res execapi.Result
	err = f.place(ctx, received, req.Runtime, req.Network == execapi.NetworkEgress, false, func(w cluster.Registration) (string, error) {
		r, tryNext, err := f.attempt(ctx, w, req, parts, events, received)
		res = r
		return tryNext, err
	})
	return res, err
}

// place runs try on one worker after another that offers runtime (with
// egress when asked; holding sessions when sessions), chosen by the power
// of K choices, while they refuse, for up to the queue wait: see Exec.
func (f *Frontend) place(ctx context.Context, received time.Time, runtime string, egress, sessions bool,
	try func(cluster.Registration) (tryNext string, err error)) error {
	deadline := received.Add(max(f.cfg.QueueWait, 0))
	var refusals []*execapi.Refusal
	tried := map[string]bool{}
	backoff := firstBackoff
	// ticket is the call's place in the line of calls waiting for room
	// (0: it never waited); see waitLine.
	var ticket uint64
	defer func() { f.line.leave(ticket) }()
	if f.line.len() > 0 && f.cfg.QueueWait >= 0 {
		ticket = f.line.join(0)
		if err := sleepCtx(ctx, min(firstBackoff, time.Until(deadline))); err != nil {
			return err
		}
	}
	for {
		live := f.live()
		if sessions {
			live = slices.DeleteFunc(live, func(w cluster.Registration) bool { return !w.Sessions })
		}
		avail := candidates(live, runtime, egress)
		if len(avail) == 0 {
			return f.noneOffers(live, runtime, egress)
		}
		// avail is this round's own copy: those already tried this round
		// are taken out of it in place.
		avail = slices.DeleteFunc(avail, func(w cluster.Registration) bool { return tried[w.ID] })
		if len(avail) == 0 {
			// Every worker that could take it said no (or was gone): wait a
			// little for room, as a server's queue would, then refuse.
			ticket = f.line.join(ticket)
			step := backoff
			if f.line.first(ticket) {
				step = firstBackoff // the oldest waiter tries most often
			}
			wait := min(step, time.Until(deadline))
			if f.cfg.QueueWait < 0 || wait <= 0 {
				return f.refusal(refusals)
			}
			if err := sleepCtx(ctx, wait); err != nil {
				return err
			}
			backoff = min(2*backoff, maxBackoff)
			clear(tried)
			continue
		}
		w := f.pick(avail)
		f.line.leave(ticket) // trying: back in its place if refused
		tryNext, err := try(w)
		if tryNext == "" {
			return err
		}
		f.m.retries.WithLabelValues(tryNext).Inc()
		tried[w.ID] = true
		var refusal *execapi.Refusal
		if r, ok := err.(*execapi.Refusal); ok && slices.Contains(execapi.AdmissionRefusals, r.Reason) {
			refusal = r
		}
		if refusal != nil {
			refusals = append(refusals, refusal)
		}
		f.log.Debug("placement: trying another worker", "worker", w.ID, "why", tryNext)
	}
}

// noneOffers is why no live worker can take a call at all.
func (f *Frontend) noneOffers(live []cluster.Registration, runtime string, egress bool) error {
	if len(live) == 0 {
		return &execapi.Refusal{Reason: execapi.RefusedNoWorkers, RetryAfter: noWorkersRetry}
	}
	if len(candidates(live, runtime, false)) > 0 && egress {
		return &execapi.ValidationError{Field: "network", Message: `"egress" is not allowed on any live worker; use "none" (sandboxes have no network)`}
	}
	names := map[string]bool{}
	for _, w := range live {
		for _, rt := range w.Runtimes {
			names[rt.Name] = true
		}
	}
	return &execapi.Refusal{Reason: execapi.RefusedUnknownRuntime, Field: "runtime",
		Detail: fmt.Sprintf("runtime %q is not offered by any live worker; runtimes offered: %s", runtime, strings.Join(slices.Sorted(maps.Keys(names)), ", "))}
}

// refusal is the answer when every worker refused within the queue wait:
// the workers' own refusal with the soonest Retry-After (each worker
// estimates from its runs in flight, so the soonest is when the cluster
// expects its first free sandbox). Workers that were gone or draining
// refused nothing: without a capacity refusal, no worker was there.
func (f *Frontend) refusal(refusals []*execapi.Refusal) *execapi.Refusal {
	var best *execapi.Refusal
	for _, r := range refusals {
		if best == nil || r.RetryAfter < best.RetryAfter {
			best = r
		}
	}
	if best == nil {
		return &execapi.Refusal{Reason: execapi.RefusedNoWorkers, RetryAfter: noWorkersRetry}
	}
	out := *best
	return &out
}

// pick samples K of the workers at random and takes the one with the most
// free sandboxes (the first sampled on a tie): a worker's own figures
// are a second old at most, and two samples already avoid the worst
// random placements.
func (f *Frontend) pick(ws []cluster.Registration) cluster.Registration {
	f.randMu.Lock()
	defer f.randMu.Unlock()
	k := min(f.cfg.Choices, len(ws))
	best := -1
	for _, i := range f.rand.Perm(len(ws))[:k] {
		if best < 0 || ws[i].Free() > ws[best].Free() {
			best = i
		}
	}
	return ws[best]
}

// sleepCtx waits for d, or less when ctx ends first (its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
