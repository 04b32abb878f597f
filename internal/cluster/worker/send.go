package worker

import (
	"time"

	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/cluster"
)

// Frames go out of the worker's lock. Publishing may block: nats.go
// writes to the socket itself once its buffer fills, for as long as the
// connection's flush timeout, and a result is megabytes. Published under
// the worker's one lock, a slow link during one call's result stopped
// every other call's answers (and the handling of every frame that came)
// until their callers took them for lost. Each call's frames therefore
// queue in its outbox, in order, and a goroutine of the call's own
// publishes them; the lock is held only to queue and to take the next.
//
// The senders take turns on the connection in the order they came
// (w.turn): nats.go's own lock lets a goroutine that just published take
// it again before one that waited, so a call publishing its result's
// parts back to back could keep another call's answer waiting for
// several parts. With turns, a frame waits for at most one frame of each
// other sender.

// queueLocked puts m in c's outbox (sent, when m is numbered) and starts
// the call's sender when none runs.
func (w *Worker) queueLocked(c *call, m *nats.Msg, sent *sentFrame) {
	if sent != nil {
		sent.queued = true
	}
	c.outbox = append(c.outbox, outFrame{msg: m, sent: sent})
	w.startSenderLocked(c)
}

// queueBeatLocked puts a beat's answer in c's outbox, unless one waits
// there already: a caller beating while its frames crawl through a slow
// link needs one answer once they are out, not one per beat.
func (w *Worker) queueBeatLocked(c *call, m *nats.Msg) {
	if c.beatQueued {
		return
	}
	c.beatQueued = true
	c.outbox = append(c.outbox, outFrame{msg: m, beat: true})
	w.startSenderLocked(c)
}

// startSenderLocked starts c's sender unless one runs.
func (w *Worker) startSenderLocked(c *call) {
	if c.sending {
		return
	}
	c.sending = true
	w.senders.Add(1)
	go w.sendOut(c)
}

// sendOut publishes c's outbox until it is empty.
func (w *Worker) sendOut(c *call) {
	defer w.senders.Done()
	for {
		w.mu.Lock()
		if len(c.outbox) == 0 {
			c.outbox, c.sending = nil, false
			w.mu.Unlock()
			return
		}
		f := c.outbox[0]
		c.outbox[0] = outFrame{}
		c.outbox = c.outbox[1:]
		if f.beat {
			c.beatQueued = false
		}
		w.mu.Unlock()
		err := w.send(f.msg)
		if f.sent != nil {
			w.mu.Lock()
			// Kept when it failed: the caller's next beat has it sent
			// again.
			f.sent.queued, f.sent.at = false, time.Now()
			w.mu.Unlock()
		}
		if err != nil {
			w.log.Warn("frame not sent", "kind", cluster.KindOf(f.msg), "err", err)
		}
	}
}

// publish sends a frame that belongs to no call the worker holds (a
// refusal, an answer about a call it does not know), outside its lock.
func (w *Worker) publish(m *nats.Msg) {
	if m == nil {
		return
	}
	if err := w.send(m); err != nil {
		w.log.Warn("answer not sent", "kind", cluster.KindOf(m), "err", err)
	}
}

// send publishes m in its turn: after the frames whose senders came
// before it.
func (w *Worker) send(m *nats.Msg) error {
	w.turn <- struct{}{} // blocked senders queue in order
	defer func() { <-w.turn }()
	return w.cfg.Conn.PublishMsg(m)
}
