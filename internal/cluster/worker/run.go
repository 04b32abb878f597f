package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// maxBatchBytes bounds the output gathered into one events frame, well
// inside any server's maximum payload once JSON-encoded.
const maxBatchBytes = 128 << 10

// startIfCompleteLocked starts the run once the go and every part are in.
func (w *Worker) startIfCompleteLocked(c *call) {
	if !c.goSeen || c.have < len(c.parts) || c.state != cluster.StateWaiting {
		return
	}
	c.state = cluster.StateRunning
	w.waiting.release(c)
	ctx, cancel := context.WithCancel(w.base)
	c.cancel = cancel
	body := bytes.Join(c.parts, nil)
	c.parts = nil
	w.runs.Add(1)
	go func() {
		defer w.runs.Done()
		defer cancel()
		w.run(ctx, c, body)
	}()
}

// run runs one call on the engine: the request checked against the
// engine's own policy, events streamed, and the result (or why there is
// none) sent in numbered frames.
func (w *Worker) run(ctx context.Context, c *call, body []byte) {
	// Encoded before the worker's lock is taken: a result of many
	// megabytes takes a while, and beats must be answered meanwhile.
	data, err := w.perform(ctx, c, body)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushLocked(c)
	switch {
	case err == nil:
		parts := cluster.Split(data, cluster.PartSize(w.cfg.Conn.MaxPayload()))
		for i, p := range parts {
			w.sendLocked(c, cluster.KindResult, p, i, len(parts))
		}
	case c.callerGone:
		// Nobody waits for an answer: the caller cancelled or is gone.
	case c.shutdownKill:
		w.sendLocked(c, cluster.KindFailed, cluster.EncodeFailure(cluster.Failure{
			Message: "the worker was stopped before the run finished; its sandbox was killed"}), -1, -1)
	default:
		fail := cluster.FailureOf(err)
		if fail.Message != "" && ctx.Err() == nil {
			// Refusals and invalid requests are the caller's news, not
			// the operator's.
			w.log.Warn("run failed", "call", c.id, "err", err)
		}
		w.sendLocked(c, cluster.KindFailed, cluster.EncodeFailure(fail), -1, -1)
	}
	c.state, c.finished, c.cancel = cluster.StateFinished, time.Now(), nil
	if c.callerGone {
		delete(w.calls, c.id)
	}
}

// perform runs the call or session operation c and encodes its answer.
func (w *Worker) perform(ctx context.Context, c *call, body []byte) ([]byte, error) {
	if c.op != "" {
		return w.sessionOp(ctx, c, body)
	}
	res, err := w.exec(ctx, c, body)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// exec decodes and checks the request with the engine's own policy (the
// front end's view of limits is not trusted) and runs it.
func (w *Worker) exec(ctx context.Context, c *call, body []byte) (execapi.Result, error) {
	req, err := execapi.DecodeRequest(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		return execapi.Result{}, err
	}
	w.mu.Lock()
	aliases := w.aliases
	w.mu.Unlock()
	if !w.offers(req.Runtime, aliases) {
		return execapi.Result{}, w.notOffered(req.Runtime)
	}
	checked, err := w.cfg.Engine.Policy().Validate(req)
	if err != nil {
		return execapi.Result{}, err
	}
	sink := func(ev execapi.Event) { w.event(c, ev) }
	return w.cfg.Engine.ExecChecked(execapi.WithCaller(ctx, c.caller), checked, sink)
}

// event gathers one event of a run for the caller, sent at most Flush
// later (or at once when a frame's worth has gathered): a short run's
// events go in one frame, or with its result, rather than a message each
// on the call's path.
func (w *Worker) event(c *call, ev execapi.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c.batch = append(c.batch, cluster.WireEvent{Kind: ev.Kind, Data: ev.Data})
	c.batchBytes += len(ev.Data)
	switch {
	case c.batchBytes >= maxBatchBytes:
		w.flushLocked(c)
	case c.flush == nil:
		c.flush = time.AfterFunc(w.t.Flush, func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			c.flush = nil
			w.flushLocked(c)
		})
	}
}

// flushLocked sends the gathered events in one frame.
func (w *Worker) flushLocked(c *call) {
	if c.flush != nil {
		c.flush.Stop()
		c.flush = nil
	}
	if len(c.batch) == 0 {
		return
	}
	data, _ := json.Marshal(c.batch)
	c.batch, c.batchBytes = nil, 0
	w.sendLocked(c, cluster.KindEvents, data, -1, -1)
}

// sendLocked sends a numbered frame of c and keeps it until the caller
// acknowledges it; part and parts place a result's part (-1: none).
func (w *Worker) sendLocked(c *call, kind cluster.Kind, body []byte, part, parts int) {
	if c.callerGone {
		return
	}
	c.seq++
	m := cluster.NewFrame(c.reply, "", kind, body)
	m.Header.Set(cluster.HeaderInstance, w.instance)
	cluster.SetInt(m, cluster.HeaderSeq, c.seq)
	if part >= 0 {
		cluster.SetInt(m, cluster.HeaderPart, part)
		cluster.SetInt(m, cluster.HeaderParts, parts)
	}
	f := &sentFrame{seq: c.seq, msg: m}
	c.unacked = append(c.unacked, f)
	w.queueLocked(c, m, f)
}
