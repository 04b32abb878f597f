package worker

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// maxRequestBytes bounds a request a worker takes, whatever a front end
// sends: a front end's body limit is 10 MiB by default, and the contract's
// own limits (code, files, env) far less; a worker never holds more for one
// call.
const maxRequestBytes = 64 << 20

// handle takes one frame addressed to the worker. NATS calls it for one
// message at a time; it never waits for a run, nor for a frame to go out
// (see queueLocked).
func (w *Worker) handle(m *nats.Msg) {
	if m.Reply == "" {
		return // nobody to answer: no front end sends such a frame
	}
	w.mu.Lock()
	answer := w.handleLocked(m)
	w.mu.Unlock()
	w.publish(answer)
}

// handleLocked handles one frame; answer, when set, is to be published
// once the lock is released (frames of calls the worker holds go through
// their outbox instead).
func (w *Worker) handleLocked(m *nats.Msg) (answer *nats.Msg) {
	id := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	if w.stopped {
		return nil
	}
	c := w.calls[id]
	kind := cluster.KindOf(m)
	if c != nil {
		c.heard = time.Now()
	}
	switch kind {
	case cluster.KindOffer:
		if c == nil {
			return w.offerLocked(id, m)
		}
	case cluster.KindPart:
		if c != nil && c.state == cluster.StateWaiting {
			if i := cluster.Int(m, cluster.HeaderPart); i > 0 && i < len(c.parts) && c.parts[i] == nil && int64(len(m.Data)) <= w.cfg.Conn.MaxPayload() {
				c.parts[i] = m.Data
				c.have++
				w.startIfCompleteLocked(c)
			}
		}
	case cluster.KindGo:
		if c == nil {
			return w.answer(m, cluster.KindUnknown, nil)
		}
		if c.state == cluster.StateWaiting {
			c.goSeen = true
			w.startIfCompleteLocked(c)
		}
	case cluster.KindBeat:
		if c == nil {
			return w.answer(m, cluster.KindUnknown, nil)
		}
		w.ackLocked(c, cluster.Int(m, cluster.HeaderAck))
		w.beatLocked(c, m.Reply)
	case cluster.KindCancel:
		if c == nil {
			return nil
		}
		switch c.state {
		case cluster.StateWaiting:
			w.forgetLocked(id)
		case cluster.StateRunning:
			c.callerGone = true
			c.cancel()
		default:
			delete(w.calls, id)
		}
	case cluster.KindDone:
		if c != nil && c.state == cluster.StateFinished {
			delete(w.calls, id)
		}
	}
	return nil
}

// offerLocked takes an offer: refused at once when the worker drains or
// does not offer the runtime or the network, else held until its go. A
// refusal is returned, to be published once the lock is released.
func (w *Worker) offerLocked(id string, m *nats.Msg) (refusal *nats.Msg) {
	if _, gone := w.tombs[id]; gone {
		return nil
	}
	n := cluster.Int(m, cluster.HeaderParts)
	if maxParts := maxRequestBytes/cluster.PartSize(w.cfg.Conn.MaxPayload()) + 1; n < 1 || n > maxParts {
		return w.refusal(m, cluster.Failure{Invalid: &execapi.ValidationError{Field: "request", Message: "the front end sent an offer with " + strconv.Itoa(n) + " parts"}})
	}
	if w.draining {
		return w.refusal(m, cluster.Failure{Refusal: &execapi.Refusal{Reason: execapi.RefusedDraining}})
	}
	op := m.Header.Get(cluster.HeaderOp)
	if f, ok := w.checkOpLocked(op); !ok {
		return w.refusal(m, f)
	}
	if f, ok := w.checkOfferLocked(m.Header.Get(cluster.HeaderRuntime), m.Header.Get(cluster.HeaderNetwork)); !ok {
		return w.refusal(m, f)
	}
	now := time.Now()
	c := &call{id: id, reply: m.Reply, caller: m.Header.Get(cluster.HeaderCaller), op: op, state: cluster.StateWaiting, created: now, heard: now}
	if r := w.holdOfferLocked(c, n); r != nil {
		return w.refusal(m, cluster.Failure{Refusal: r})
	}
	c.parts = make([][]byte, n)
	c.parts[0], c.have = m.Data, 1
	if c.parts[0] == nil {
		c.parts[0] = []byte{}
	}
	w.calls[id] = c
	w.queueLocked(c, w.answer(m, cluster.KindReady, nil), nil)
	return nil
}

// checkOfferLocked refuses, before anything is sent to it, a call whose
// runtime or network the worker does not offer: another worker may. The
// request's other fields are checked with the engine's own policy once
// it has come whole.
func (w *Worker) checkOfferLocked(runtime, network string) (cluster.Failure, bool) {
	if runtime != "" && !w.offers(runtime, w.aliases) {
		return cluster.Failure{Refusal: w.notOffered(runtime)}, false
	}
	if network == execapi.NetworkEgress && !w.cfg.Engine.Policy().AllowEgress {
		return cluster.Failure{Invalid: &execapi.ValidationError{Field: "network", Message: "\"egress\" is not allowed on worker " + w.cfg.ID},
			Elsewhere: true}, false
	}
	return cluster.Failure{}, true
}

// checkOpLocked refuses a session operation the worker cannot serve:
// an open may go to another worker; any other op names a session this
// worker does not hold.
func (w *Worker) checkOpLocked(op string) (cluster.Failure, bool) {
	switch {
	case op == "":
		return cluster.Failure{}, true
	case !slices.Contains(cluster.SessionOps, op):
		return cluster.Failure{Invalid: &execapi.ValidationError{Field: "request", Message: "unknown operation " + strconv.Quote(op)}}, false
	case w.cfg.Sessions != nil:
		return cluster.Failure{}, true
	case op == cluster.OpSessionOpen:
		return cluster.Failure{Invalid: &execapi.ValidationError{Field: "runtime", Message: "sessions are off on worker " + w.cfg.ID}, Elsewhere: true}, false
	default:
		return cluster.FailureOf(execapi.ErrSessionNotFound), false
	}
}

// notOffered is the refusal of a runtime the operator did not let this
// worker offer.
func (w *Worker) notOffered(runtime string) *execapi.Refusal {
	return &execapi.Refusal{Reason: execapi.RefusedUnknownRuntime, Field: "runtime",
		Detail: "runtime " + strconv.Quote(runtime) + " is not offered by worker " + w.cfg.ID + " (it offers " + strings.Join(slices.Sorted(maps.Keys(w.offered)), ", ") + ")"}
}

// refusal is the answer refusing an offer.
func (w *Worker) refusal(m *nats.Msg, f cluster.Failure) *nats.Msg {
	return w.answer(m, cluster.KindRefused, cluster.EncodeFailure(f))
}

// answer is an unnumbered frame in reply to m, with the worker's
// instance. (Not its free sandboxes: asking admission reads the cgroups'
// memory and the CPUs' pressure, which cost more than the answer itself;
// the registration carries them every beat.)
func (w *Worker) answer(m *nats.Msg, kind cluster.Kind, body []byte) *nats.Msg {
	a := cluster.NewFrame(m.Reply, "", kind, body)
	a.Header.Set(cluster.HeaderInstance, w.instance)
	return a
}

// beatLocked answers a caller's beat: where the call stands, the last
// frame sent, and the parts still missing.
func (w *Worker) beatLocked(c *call, reply string) {
	b := cluster.NewFrame(reply, "", cluster.KindBeat, nil)
	b.Header.Set(cluster.HeaderInstance, w.instance)
	b.Header.Set(cluster.HeaderState, c.state)
	cluster.SetInt(b, cluster.HeaderLast, c.seq)
	if c.state == cluster.StateWaiting {
		var missing []string
		for _, i := range c.missing() {
			missing = append(missing, strconv.Itoa(i))
		}
		b.Header.Set(cluster.HeaderMissing, strings.Join(missing, ","))
	}
	// Behind the call's frames queued before it: once it goes out, so
	// have they, up to the last it names.
	w.queueBeatLocked(c, b)
}

// ackLocked forgets the frames the caller has, and sends again those it
// lacks that went out a while ago (lost with a NATS node, say): not those
// still in the outbox, which have not gone out yet (a slow link).
func (w *Worker) ackLocked(c *call, ack int) {
	i := 0
	for i < len(c.unacked) && c.unacked[i].seq <= ack {
		i++
	}
	c.unacked = c.unacked[i:]
	now := time.Now()
	for _, f := range c.unacked {
		if f.queued || now.Sub(f.at) < w.t.Resend {
			continue
		}
		w.queueLocked(c, f.msg, f)
	}
}
