package frontend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Why a call went to another worker (the reason label of
// scratchrun_placement_retries_total, beside a refusal's reason).
const (
	retryNoResponders = "no_responders" // nobody listens on the worker's subjects
	retryNoAnswer     = "no_answer"     // the offer went unanswered
	retryPublish      = "publish"       // the offer could not be sent
	retryElsewhere    = "elsewhere"     // the worker cannot run it, another may
	retryMalformed    = "malformed"     // the worker flooded the offer's answers
)

// attempt offers the call to worker w and, when it is ready, sends the
// request and the go and follows the run to its end. tryNext is set (to
// why) when nothing ran and the call may go to another worker; err is
// then the worker's refusal, if it gave one. Otherwise the call ended
// here, with res or err.
func (f *Frontend) attempt(ctx context.Context, w cluster.Registration, req execapi.Request, parts [][]byte,
	events execapi.EventSink, received time.Time) (res execapi.Result, tryNext string, err error) {
	spec := offerSpec{runtime: req.Runtime, network: req.Network, resultLimit: f.resultLimit(w, req),
		decode: func(data []byte) error { return json.Unmarshal(data, &res) }}
	_, tryNext, err = f.offer(ctx, w, spec, parts, events, received)
	if tryNext != "" || err != nil {
		res = execapi.Result{}
	} else if res.Files == nil {
		res.Files = map[string]string{}
	}
	return ranOn(w.ID, res, tryNext, err)
}

// offerSpec is what an offer says of its call (a plain call or a session
// operation), and how its result is read.
type offerSpec struct {
	// op is the session operation (cluster.OpSession*), "" for a call.
	op               string
	runtime, network string
	// resultLimit bounds the result's JSON.
	resultLimit int64
	// decode reads the whole result; its error makes the answer
	// malformed (the call is lost).
	decode func([]byte) error
}

// offer runs one call (or session operation) on worker w by the
// at-most-once protocol: the offer, the parts and the go once the worker
// is ready, then its frames to the end. instance is the worker's process
// that answered ready; tryNext and err as attempt's.
func (f *Frontend) offer(ctx context.Context, w cluster.Registration, spec offerSpec, parts [][]byte,
	events execapi.EventSink, received time.Time) (instance, tryNext string, err error) {
	c := &attemptCall{f: f, w: w, id: nuid.Next(), events: events, received: received, decode: spec.decode}
	c.resultLimit = spec.resultLimit
	c.budget = &budget{limit: f.heldLimit(c.resultLimit), total: &f.held}
	c.box = f.open(c.id, c.budget)
	defer f.closeBox(c.id)
	defer c.releaseHeld()
	c.reply = f.inbox + "." + c.id
	c.subject = cluster.CallSubject(w.ID, c.id)

	offer := cluster.NewFrame(c.subject, c.reply, cluster.KindOffer, parts[0])
	cluster.SetInt(offer, cluster.HeaderParts, len(parts))
	offer.Header.Set(cluster.HeaderRuntime, spec.runtime)
	offer.Header.Set(cluster.HeaderNetwork, spec.network)
	offer.Header.Set(cluster.HeaderCaller, execapi.CallerFrom(ctx))
	if spec.op != "" {
		offer.Header.Set(cluster.HeaderOp, spec.op)
	}
	if err := f.nc.PublishMsg(offer); err != nil {
		return "", retryPublish, nil
	}
	if tryNext, err := c.awaitReady(ctx); tryNext != "" || err != nil {
		return "", tryNext, err
	}
	// From the go on, the call is this worker's: never another's.
	c.parts = parts
	c.sendParts(nil)
	c.send(cluster.KindGo, nil)
	_, tryNext, err = c.follow(ctx)
	return c.instance, tryNext, err
}

// ranOn names worker as the one that ran a call that went to it: on its
// result, or on its error when its code may have run there (a call it
// refused or found invalid did not run; a lost one names it already).
func ranOn(worker string, res execapi.Result, tryNext string, err error) (execapi.Result, string, error) {
	var refusal *execapi.Refusal
	var lost *execapi.WorkerLostError
	switch {
	case tryNext != "", errors.As(err, &refusal), execapi.IsValidation(err), errors.As(err, &lost):
	case err != nil:
		err = &execapi.WorkerError{Worker: worker, Err: err}
	default:
		res.Worker = worker
	}
	return res, tryNext, err
}

// attemptCall is one call on one worker.
type attemptCall struct {
	f                      *Frontend
	w                      cluster.Registration
	id, reply, subject     string
	box                    *mailbox
	events                 execapi.EventSink
	received               time.Time
	decode                 func([]byte) error
	parts                  [][]byte
	instance               string
	contiguous             int
	pending                map[int]*nats.Msg
	heard, goneSince, beat time.Time

	// result are the result's parts so far, in order, of resultParts;
	// resultBytes their size, never above resultLimit.
	result      [][]byte
	resultParts int
	resultBytes int64
	resultLimit int64
	// budget bounds what the call holds of the worker's answers; held
	// is the call's own share of it (pending frames, result parts), the
	// mailbox's being the mailbox's.
	budget *budget
	held   int64
}

// hold counts n more bytes the call holds; false when its budget has no
// room for them.
func (c *attemptCall) hold(n int64) bool {
	if !c.budget.take(n) {
		return false
	}
	c.held += n
	return true
}

// unhold counts n bytes the call no longer holds.
func (c *attemptCall) unhold(n int64) {
	c.held -= n
	c.budget.give(n)
}

// releaseHeld gives up everything the call holds, once it ends.
func (c *attemptCall) releaseHeld() {
	c.unhold(c.held)
	c.pending, c.result = nil, nil
}

// send sends a frame of the call to the worker.
func (c *attemptCall) send(kind cluster.Kind, set func(*nats.Msg)) {
	m := cluster.NewFrame(c.subject, c.reply, kind, nil)
	if set != nil {
		set(m)
	}
	if err := c.f.nc.PublishMsg(m); err != nil {
		c.f.log.Debug("frame not sent", "kind", kind, "worker", c.w.ID, "err", err)
	}
}

// sendParts sends the request's parts after the first (which went with
// the offer): all of them, or those listed.
func (c *attemptCall) sendParts(which []int) {
	if which == nil {
		for i := 1; i < len(c.parts); i++ {
			which = append(which, i)
		}
	}
	for _, i := range which {
		if i <= 0 || i >= len(c.parts) {
			continue
		}
		m := cluster.NewFrame(c.subject, c.reply, cluster.KindPart, c.parts[i])
		cluster.SetInt(m, cluster.HeaderPart, i)
		if err := c.f.nc.PublishMsg(m); err != nil {
			c.f.log.Debug("part not sent", "worker", c.w.ID, "err", err)
		}
	}
}

// awaitReady waits for the worker's answer to the offer. Nothing runs
// before the go, so every way this ends without "ready" lets the call go
// elsewhere (or ends it, when the caller went away or the request is one
// no worker would take).
func (c *attemptCall) awaitReady(ctx context.Context) (tryNext string, err error) {
	timer := time.NewTimer(c.f.t.ReadyWait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			c.send(cluster.KindCancel, nil)
			return "", ctx.Err()
		case <-timer.C:
			// It may yet answer: it is told to forget the offer, and it
			// would forget it anyway without a go.
			c.send(cluster.KindCancel, nil)
			return retryNoAnswer, nil
		case <-c.box.signal:
		}
		msgs, overflow := c.box.take()
		if overflow {
			// Nothing ran (no go was sent): another worker may take it.
			c.send(cluster.KindCancel, nil)
			c.f.log.Warn("a worker flooded an offer's answers", "worker", c.w.ID)
			return retryMalformed, nil
		}
		for _, m := range msgs {
			switch {
			case cluster.NoResponders(m):
				c.f.reg.markGone(c.w.ID)
				return retryNoResponders, nil
			case cluster.KindOf(m) == cluster.KindReady:
				c.instance = m.Header.Get(cluster.HeaderInstance)
				return "", nil
			case cluster.KindOf(m) == cluster.KindRefused:
				return c.failed(cluster.DecodeFailure(m.Data))
			}
		}
	}
}

// failed is how a worker's failure ends the attempt: with its error, and
// tryNext set when nothing ran and another worker may take the call.
func (c *attemptCall) failed(fail cluster.Failure) (tryNext string, err error) {
	if fail.Retryable() {
		return retryReason(fail), fail.Err(c.w.ID)
	}
	return "", fail.Err(c.w.ID)
}

// retryReason labels a retry after a failure that may go elsewhere.
func retryReason(f cluster.Failure) string {
	if f.Refusal != nil {
		return string(f.Refusal.Reason)
	}
	return retryElsewhere
}

// follow takes the run's frames in order until its result or failure,
// beats to the worker (acknowledging what it has, so that what was lost
// is sent again), and gives the call up as lost when the worker falls
// silent or is a new process.
func (c *attemptCall) follow(ctx context.Context) (execapi.Result, string, error) {
	t := c.f.t
	c.pending = map[int]*nats.Msg{}
	now := time.Now()
	c.heard, c.beat = now, now
	tick := time.NewTicker(t.Beat / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			c.send(cluster.KindCancel, nil)
			return execapi.Result{}, "", ctx.Err()
		case <-tick.C:
			now := time.Now()
			switch {
			case now.Sub(c.heard) > t.LostAfter:
				return c.lost(fmt.Sprintf("no word from it for %s", now.Sub(c.heard).Round(100*time.Millisecond)))
			case !c.goneSince.IsZero() && now.Sub(c.goneSince) > t.GoneAfter:
				return c.lost(fmt.Sprintf("nobody listened on its subjects for %s", now.Sub(c.goneSince).Round(100*time.Millisecond)))
			case now.Sub(c.beat) >= t.Beat || !c.goneSince.IsZero():
				c.sendBeat(now)
			}
		case <-c.box.signal:
		}
		msgs, overflow := c.box.take()
		if overflow {
			return c.malformed(fmt.Sprintf("its answers came faster than they were read, beyond the %d bytes its call may hold", c.budget.limit))
		}
		for _, m := range msgs {
			if res, tryNext, err, done := c.take(m); done {
				return res, tryNext, err
			}
		}
	}
}

// sendBeat tells the worker the caller still waits and which frames it has.
func (c *attemptCall) sendBeat(now time.Time) {
	c.beat = now
	c.send(cluster.KindBeat, func(m *nats.Msg) { cluster.SetInt(m, cluster.HeaderAck, c.contiguous) })
}

// take handles one frame from the worker; done says the call ended.
func (c *attemptCall) take(m *nats.Msg) (res execapi.Result, tryNext string, err error, done bool) {
	now := time.Now()
	if cluster.NoResponders(m) {
		// The worker's subscription is gone: it died, or it is moving to
		// another NATS node; a beat answered again says which.
		if c.goneSince.IsZero() {
			c.goneSince = now
		}
		return
	}
	if inst := m.Header.Get(cluster.HeaderInstance); inst != "" && inst != c.instance {
		res, tryNext, err = c.lost("a new process of it answered: it restarted")
		return res, tryNext, err, true
	}
	c.heard, c.goneSince = now, time.Time{}
	c.f.reg.heard(c.w.ID, now)
	switch cluster.KindOf(m) {
	case cluster.KindUnknown:
		res, tryNext, err = c.lost("it no longer knows the call")
		return res, tryNext, err, true
	case cluster.KindBeat:
		switch m.Header.Get(cluster.HeaderState) {
		case cluster.StateWaiting:
			// The go, or parts, were lost on the way (a NATS node gone).
			c.sendParts(parseList(m.Header.Get(cluster.HeaderMissing), len(c.parts)))
			c.send(cluster.KindGo, nil)
		default:
			if cluster.Int(m, cluster.HeaderLast) > c.contiguous && now.Sub(c.beat) > c.f.t.Beat/2 {
				c.sendBeat(now) // frames are missing: ask for them again
			}
		}
		return
	}
	seq := cluster.Int(m, cluster.HeaderSeq)
	if seq <= c.contiguous || c.pending[seq] != nil {
		return // a frame sent again that came twice
	}
	// Held until the frames before it come: within the call's budget,
	// however many a worker sends out of order.
	if !c.hold(msgCost(m)) {
		res, tryNext, err = c.malformed(fmt.Sprintf("it sent %d frames out of order, more than the %d bytes its call may hold", len(c.pending)+1, c.budget.limit))
		return res, tryNext, err, true
	}
	c.pending[seq] = m
	for {
		next := c.pending[c.contiguous+1]
		if next == nil {
			return
		}
		delete(c.pending, c.contiguous+1)
		c.unhold(msgCost(next))
		c.contiguous++
		if res, tryNext, err, done = c.process(next); done {
			c.send(cluster.KindDone, nil)
			return res, tryNext, err, true
		}
	}
}

// process handles the worker's numbered frames, in order.
func (c *attemptCall) process(m *nats.Msg) (res execapi.Result, tryNext string, err error, done bool) {
	switch cluster.KindOf(m) {
	case cluster.KindResult:
		return c.resultPart(m)
	case cluster.KindEvents:
		var evs []cluster.WireEvent
		if json.Unmarshal(m.Data, &evs) == nil && c.events != nil {
			for _, we := range evs {
				ev := we.Event()
				ev.Elapsed = time.Since(c.received)
				c.events(ev)
			}
		}
	case cluster.KindFailed:
		fail := cluster.DecodeFailure(m.Data)
		// Its engine refused after all (admission): nothing ran, and
		// until its next heartbeat it counts as full.
		if fail.Refusal != nil && slices.Contains(execapi.AdmissionRefusals, fail.Refusal.Reason) {
			c.f.reg.markFull(c.w.ID)
		}
		tryNext, err := c.failed(fail)
		return execapi.Result{}, tryNext, err, true
	}
	return
}

// resultPart takes one part of the result; done once it is whole. The
// worker numbers its parts in order, so they come in order: nothing is
// sized by the count it announces, and what they weigh together is held
// to the result's limit.
func (c *attemptCall) resultPart(m *nats.Msg) (res execapi.Result, tryNext string, err error, done bool) {
	part, parts := cluster.Int(m, cluster.HeaderPart), cluster.Int(m, cluster.HeaderParts)
	maxParts := c.resultLimit/cluster.MinPartSize + 1
	switch {
	case parts < 1 || int64(parts) > maxParts || part != len(c.result) || c.resultParts != 0 && parts != c.resultParts:
		res, tryNext, err = c.malformed(fmt.Sprintf("result part %d of %d after %d parts (at most %d parts)", part, parts, len(c.result), maxParts))
		return res, tryNext, err, true
	case c.resultBytes+int64(len(m.Data)) > c.resultLimit || !c.hold(int64(len(m.Data))):
		res, tryNext, err = c.malformed(fmt.Sprintf("a result larger than the %d bytes its caps allow", c.resultLimit))
		return res, tryNext, err, true
	}
	c.result, c.resultParts = append(c.result, m.Data), parts
	c.resultBytes += int64(len(m.Data))
	if len(c.result) < parts {
		return
	}
	if err := c.decode(bytes.Join(c.result, nil)); err != nil {
		res, tryNext, err = c.malformed(fmt.Sprintf("a result that is not the contract's JSON: %v", err))
		return res, tryNext, err, true
	}
	return execapi.Result{}, "", nil, true
}

// malformed ends the call as lost with a worker whose answer breaks the
// protocol or the call's bounds: the code may have run, and what the
// worker sends is no longer trusted to say how it ended.
func (c *attemptCall) malformed(why string) (execapi.Result, string, error) {
	return c.lost("it sent a malformed answer: " + why)
}

// lost ends the call as lost with its worker: it may have run, and it is
// never sent to another. The worker, if it lives, is told to kill it.
func (c *attemptCall) lost(why string) (execapi.Result, string, error) {
	c.send(cluster.KindCancel, nil)
	c.f.m.lost.Inc()
	c.f.log.Warn("a call was lost with its worker", "worker", c.w.ID, "why", why)
	return execapi.Result{}, "", &execapi.WorkerLostError{Worker: c.w.ID, Why: why}
}

// parseList reads a worker's list of missing parts: at most n of them
// (there are no more), whatever the header holds.
func parseList(s string, n int) []int {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if len(out) >= n {
			break
		}
		if v, err := strconv.Atoi(f); err == nil {
			out = append(out, v)
		}
	}
	if out == nil {
		out = []int{}
	}
	return out
}
